# accelerator.prepare(model) does not pipeline a model: under `accelerate launch` with 2 processes it
# wraps it in DistributedDataParallel, so every rank keeps ALL of the model's layers, with the same
# values on every rank (rank 0's, broadcast when DDP is built), and runs the whole model on its own
# data. A pipeline would leave each rank only its stage's layers.
# Measured: the share of the model's parameters (elements, over the whole model's parameter names) that
# this rank's prepared model holds AND that are equal on every rank. Each rank first initialises the
# model with its own seed, so equal values can only come from prepare's broadcast.
# Negative control: the same program without prepare (each rank keeps its own initialisation).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/model-parallelism/prepare_replicates_not_pipelines.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import copy

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import set_seed

import _claims

accelerator = Accelerator()
set_seed(accelerator.process_index)  # a different initialisation on every rank
model = torch.nn.Sequential(*(torch.nn.Linear(16, 16) for _ in range(4))).to(accelerator.device)
names = [name for name, _ in model.named_parameters()]  # the whole model, in the same order on every rank
sizes = [p.numel() for p in model.parameters()]


def replicated_share(module):
    """Share of the whole model's parameter elements this rank holds with the same value on every rank."""
    held = dict(module.named_parameters())
    flat = torch.cat(
        [
            held[name].detach().flatten().float() if name in held else torch.full((size,), float("nan"), device=accelerator.device)
            for name, size in zip(names, sizes)
        ]
    )
    every_rank = [torch.empty_like(flat) for _ in range(accelerator.num_processes)]
    dist.all_gather(every_rank, flat)
    same = torch.stack([other == flat for other in every_rank]).all(dim=0)  # a NaN (not held) is never equal
    return same.sum().item() / flat.numel()


prepared = accelerator.prepare(copy.deepcopy(model))
with_prepare = replicated_share(accelerator.unwrap_model(prepared))
without_prepare = replicated_share(copy.deepcopy(model))

_claims.equal(
    "prepare_keeps_a_whole_replica_on_every_rank",
    measured=with_prepare,
    control=without_prepare,
    expected=1.0,
    wrapper=type(prepared).__name__,
    parameters=sum(sizes),
    layers_held=sum(isinstance(layer, torch.nn.Linear) for layer in accelerator.unwrap_model(prepared)),
)
