# Reading and changing a sharded parameter outside forward/backward: FSDP's summon_full_params, the torch
# counterpart of DeepSpeed's deepspeed.zero.GatheredParameters (DeepSpeed is not installed here).
# On 2 ranks with FSDP1 (use_orig_params=True): outside the context each rank's parameters are views of its
# half of the flat parameter; inside, every parameter has its full shape; a change made on rank 0 alone
# persists only in rank 0's shard, because the writeback keeps each rank's own portion (DeepSpeed asks for
# modifier_rank for that reason: it broadcasts the modifier's copy on exit).
# Negative controls: the same parameters outside the context; the same change made on every rank.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/sharded-training/fsdp_summon_full_params.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import torch
from accelerate import Accelerator
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

import _claims

accelerator = Accelerator()
rank = accelerator.process_index


def build():
    torch.manual_seed(0)
    dense = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    shapes = [tuple(p.shape) for p in dense.parameters()]
    return FSDP(dense, device_id=torch.device("cpu"), use_orig_params=True), shapes


model, full_shapes = build()
full_elements = sum(torch.Size(shape).numel() for shape in full_shapes)


def local_share(net):
    return sum(p.numel() for p in net.parameters()) / full_elements


def full_shape_share(net):
    return sum(tuple(p.shape) == shape for p, shape in zip(net.parameters(), full_shapes)) / len(full_shapes)


outside_share = local_share(model)
with FSDP.summon_full_params(model):
    inside_share, inside_shapes = local_share(model), full_shape_share(model)
_claims.at_most(
    "outside_a_rank_holds_its_shard",
    measured=outside_share,
    control=inside_share,  # the same parameters inside summon_full_params
    tolerance=0.5,
)
_claims.at_least(
    "summon_full_params_gives_full_shapes",
    measured=inside_shapes,
    control=full_shape_share(model),  # the same parameters after the context: shards again
    bound=1.0,
)


def zeroed_share_after(modifiers, net):
    """Zero every parameter inside summon_full_params (writeback left at its default) on the ranks in
    `modifiers`; then the share of the full model's elements that are zero, read in a fresh context."""
    with FSDP.summon_full_params(net):
        if rank in modifiers:
            with torch.no_grad():
                for param in net.parameters():
                    param.zero_()
    with FSDP.summon_full_params(net, writeback=False):
        return sum((p == 0).sum().item() for p in net.parameters()) / full_elements


_claims.between(
    "one_ranks_change_persists_in_its_shard_only",
    measured=zeroed_share_after({0}, build()[0]),  # a fresh model of the same weights
    control=zeroed_share_after({0, 1}, model),  # every rank makes the same change
    low=0.4,
    high=0.6,
)
