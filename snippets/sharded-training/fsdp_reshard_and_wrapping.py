# FSDP's knobs, measured with torch's FSDP2 `fully_shard` on 2 CPU ranks:
#   reshard_after_forward=True  (FULL_SHARD, ZeRO-3): parameters freed after forward, all-gathered again
#                                in backward: 2 all-gathers per unit per step
#   reshard_after_forward=False (SHARD_GRAD_OP, ZeRO-2-like): unsharded parameters kept from forward to
#                                backward: 1 all-gather per unit per step, more memory between them;
#                                after backward they are resharded (between steps only shards are held;
#                                control: the same run with set_reshard_after_backward(False))
#   wrapping: fully_shard on each block, then the root: only one block is unsharded at a time;
#             fully_shard on the root alone: the whole model is unsharded during forward
#   HSDP (HYBRID_SHARD): a 2-D mesh (replicate, shard); with a shard group of 1 it is plain replication
#   MixedPrecisionPolicy(param_dtype=bf16): weights are bf16 inside forward, the sharded copy stays fp32
#   and with torch's FSDP1 (FullyShardedDataParallel): SHARD_GRAD_OP keeps the full flat parameter after a
#   backward inside no_sync() (gradient accumulation), resharding only after a synced backward
# Negative controls: the other setting of each knob; for FSDP1's no_sync, the same backward synced.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/sharded-training/fsdp_reshard_and_wrapping.py
import contextlib
import copy
from collections import Counter

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor

import _claims

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
set_seed(0)
model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh()) for _ in range(4)])
x, y = torch.randn(8, 64), torch.randn(8, 64)
mesh = init_device_mesh("cpu", (world,))
total_elements = sum(p.numel() for p in model.parameters())


@contextlib.contextmanager
def count_all_gathers(counts):
    original = dist.all_gather_single  # what FSDP2's default AllGather calls

    def counted(*args, **kwargs):
        counts["all_gather"] += 1
        return original(*args, **kwargs)

    dist.all_gather_single = counted
    try:
        yield
    finally:
        dist.all_gather_single = original


def unsharded_elements(net):
    """Elements of the parameters that are currently full tensors (FSDP swaps in DTensor shards when resharded)."""
    return sum(p.numel() for p in net.parameters() if not isinstance(p, DTensor))


def build(per_block=True, reshard_after_forward=True, mp_policy=None, fsdp_mesh=mesh):
    net = copy.deepcopy(model)
    kwargs = dict(mesh=fsdp_mesh, reshard_after_forward=reshard_after_forward)
    if mp_policy is not None:
        kwargs["mp_policy"] = mp_policy
    if per_block:
        for block in net:
            fully_shard(block, **kwargs)  # one unit per block ...
    fully_shard(net, **kwargs)  # ... then the root (alone, it is the only unit)
    return net


def step_and_watch(net):
    """One step; returns all-gathers, peak unsharded elements seen inside forward, after forward, after backward."""
    counts, peak = Counter(), [0]
    # a pre-hook registered after fully_shard runs after FSDP's own (prepended) all-gather hook
    hooks = [block.register_forward_pre_hook(lambda *_: peak.append(unsharded_elements(net))) for block in net]
    with count_all_gathers(counts):
        loss = torch.nn.functional.mse_loss(net(x), y)
        after_forward = unsharded_elements(net)
        loss.backward()
        after_backward = unsharded_elements(net)  # the step's end: what the parameters are between steps
    for hook in hooks:
        hook.remove()
    return counts["all_gather"], max(peak), after_forward, after_backward


gathers_reshard, peak_reshard, after_reshard, _ = step_and_watch(build(reshard_after_forward=True))
gathers_keep, peak_keep, after_keep, after_backward_keep = step_and_watch(build(reshard_after_forward=False))
gathers_root, peak_root, after_root, _ = step_and_watch(build(per_block=False, reshard_after_forward=True))
# the same SHARD_GRAD_OP run with the post-backward reshard switched off (FSDP2's public setting)
kept_after_backward = build(reshard_after_forward=False)
kept_after_backward.set_reshard_after_backward(False)
_, _, _, after_backward_no_reshard = step_and_watch(kept_after_backward)
units = len(model)

_claims.equal(
    "keep_unsharded_skips_backward_allgather",
    measured=gathers_keep,
    control=gathers_reshard,  # reshard_after_forward=True: all-gathered again in backward
    expected=units,  # one all-gather per unit per step
    all_gathers_reshard_true=gathers_reshard,
    units=units,
)
_claims.at_most(
    "reshard_frees_parameters_after_forward",
    measured=after_reshard / total_elements,  # share of the model held unsharded between forward and backward
    control=after_keep / total_elements,  # reshard_after_forward=False keeps them all
    tolerance=0.0,
    unsharded_after_forward_keep=after_keep,
    total_elements=total_elements,
)
_claims.at_most(
    "shard_grad_op_reshards_after_backward",
    measured=after_backward_keep / total_elements,  # reshard_after_forward=False, once backward has ended
    control=after_backward_no_reshard / total_elements,  # the same run, set_reshard_after_backward(False)
    tolerance=0.0,
    unsharded_after_backward=after_backward_keep,
    unsharded_after_forward=after_keep,  # between forward and backward the parameters are gathered
    total_elements=total_elements,
)
_claims.between(
    "per_block_wrapping_bounds_peak",
    measured=peak_reshard / total_elements,  # largest share of the model unsharded at once in forward
    control=peak_root / total_elements,  # fully_shard on the root only: one unit, all of it at once
    low=0.25,  # one whole block is gathered (a hook that ran before the all-gather would read 0)
    high=0.25,  # one block of 4 (no forward prefetch is set): two blocks at once would fail
    block_elements=total_elements // units,
    all_gathers_root_only=gathers_root,
)

# HYBRID_SHARD / HSDP: mesh (replicate, shard). 2 ranks as (2 replicas x 1 shard) vs (1 x 2 shards).
def local_share(net):
    return sum(p.to_local().numel() for p in net.parameters()) / total_elements


hsdp = build(fsdp_mesh=init_device_mesh("cpu", (world, 1), mesh_dim_names=("replicate", "shard")))
fsdp_2d = build(fsdp_mesh=init_device_mesh("cpu", (1, world), mesh_dim_names=("replicate", "shard")))
_claims.between(
    "hsdp_replicates_across_groups",
    measured=local_share(hsdp),  # shard group of 1: each rank holds everything, replicas all-reduce
    control=local_share(fsdp_2d),  # shard group of 2: half each
    low=0.999,
    high=1.001,
    placements=str(next(hsdp.parameters()).placements),
)

# MixedPrecisionPolicy: compute in bf16, keep the sharded (optimizer-facing) parameters in fp32
seen = {}
mixed = build(mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32))
plain = build()
for name, net in (("mixed", mixed), ("plain", plain)):
    hook = net[0][0].register_forward_pre_hook(lambda module, args, name=name: seen.__setitem__(name, module.weight.dtype))
    torch.nn.functional.mse_loss(net(x).float(), y).backward()
    hook.remove()


def dtypes(name, net):
    """The first Linear's weight as forward saw it, then its sharded parameter and gradient after the step."""
    weight = net[0][0].weight  # resharded again: the DTensor the optimizer steps
    return [str(seen[name]), str(weight.dtype), str(weight.grad.dtype)]


_claims.equal(
    "mp_policy_computes_in_bf16",
    measured=dtypes("mixed", mixed),
    control=dtypes("plain", plain),  # no policy: forward runs on the fp32 parameters
    expected=["torch.bfloat16", "torch.float32", "torch.float32"],
    sharded_param_is_dtensor=isinstance(mixed[0][0].weight, DTensor),
)

# FSDP1 SHARD_GRAD_OP under no_sync (what accelerator.accumulate uses for FSDP1): after a backward inside
# no_sync the unsharded flat parameter is kept (its padded full storage stays allocated); a synced backward
# frees it (_should_free_in_backward in torch/distributed/fsdp/_runtime_utils.py).
from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy  # noqa: E402


def full_flat_param_held(fsdp1):
    flat = fsdp1._handle.flat_param
    return int(flat._full_param_padded.untyped_storage().size() > 0)


fsdp1 = FullyShardedDataParallel(
    copy.deepcopy(model), sharding_strategy=ShardingStrategy.SHARD_GRAD_OP, device_id=torch.device("cpu")
)
with fsdp1.no_sync():
    torch.nn.functional.mse_loss(fsdp1(x), y).backward()
held_in_no_sync = full_flat_param_held(fsdp1)
torch.nn.functional.mse_loss(fsdp1(x), y).backward()  # the synced micro-batch that ends the accumulation
held_after_sync = full_flat_param_held(fsdp1)
_claims.equal(
    "fsdp1_shard_grad_op_keeps_params_in_no_sync",
    measured=held_in_no_sync,  # 1: the full flat parameter is still allocated after a no_sync backward
    control=held_after_sync,  # the same model after a synced backward: resharded, 0
    expected=1,
)
