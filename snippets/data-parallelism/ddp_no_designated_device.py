# DDP has no "designated device" that aggregates gradients or hands out updated parameters.
#   1. After backward, EVERY rank holds the same averaged gradient (all-reduce, not reduce-to-one).
#      Negative control: under no_sync() each rank keeps its own, different gradient.
#   2. After optimizer.step(), every rank holds identical weights: each applies the same averaged
#      gradient itself. Negative control: steps under no_sync() leave the replicas different.
#   3. Weights are broadcast from rank 0 only when DDP is constructed, never by a training step:
#      a replica nudged after construction stays nudged. Negative control: wrapping it again re-syncs it.
#   4. Once DDP has settled its buckets (first 2 iterations), a training step of a model WITHOUT buffers
#      runs no c10d collective other than all-reduce (no broadcast/reduce/gather/scatter/all-gather).
#      Negative control: DDP construction runs broadcasts and an all-gather.
#   5. Buffers are the exception: with the default forward_sync_buffers (formerly broadcast_buffers) DDP
#      broadcasts rank 0's buffers before every forward that follows a gradient-synchronising one (every
#      step of a plain loop), so a buffer set differently on each rank after
#      construction is rank 0's again after one training step. Negative control: forward_sync_buffers=False.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/data-parallelism/ddp_no_designated_device.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import contextlib
import copy

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.profiler import ProfilerActivity, profile

import _claims

ROOTED = {"c10d::broadcast_", "c10d::reduce_", "c10d::gather_", "c10d::scatter_"}  # ops with a src/dst rank
STEPS, TOLERANCE, NUDGE = 5, 1e-6, 1e-2

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
set_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).to(accelerator.device)
control_model, nudged_model = copy.deepcopy(model), copy.deepcopy(model)
set_seed(rank)  # from here on each rank draws its own data, as with a sharded DataLoader
inputs = torch.randn(STEPS, 16, 8, device=accelerator.device)
targets = torch.randn(STEPS, 16, 1, device=accelerator.device)


def spread_across_ranks(tensor):
    """Largest difference between this tensor on any rank and on rank 0 (a collective)."""
    copies = [torch.empty_like(tensor) for _ in range(world)]
    dist.all_gather(copies, tensor)
    return max((c - copies[0]).abs().max().item() for c in copies)


def flat(tensors):
    return torch.cat([t.detach().flatten() for t in tensors])


def train(ddp, optimizer, steps, sync=contextlib.nullcontext):
    """Returns the gradient of the first step, as this rank holds it after backward."""
    grads = []
    for step in steps:
        optimizer.zero_grad()
        with sync():  # no_sync must wrap the forward too
            accelerator.backward(torch.nn.functional.mse_loss(ddp(inputs[step]), targets[step]))
        grads.append(flat(p.grad for p in ddp.parameters()))
        optimizer.step()
    return grads[0]


def sgd(module):
    return torch.optim.SGD(module.parameters(), lr=0.1)


# 1, 2, 4: plain DDP; count the rooted collectives of construction and of settled steps.
with profile(activities=[ProfilerActivity.CPU]) as construction:
    ddp_model, optimizer = accelerator.prepare(model, sgd(model))
bytes_all_reduced = []
ddp_model.register_comm_hook(
    None, lambda state, bucket: bytes_all_reduced.append(bucket.buffer().nbytes) or allreduce_hook(state, bucket)
)
first_grad = train(ddp_model, optimizer, range(0, 2))  # iteration 2 rebuilds the buckets (see the page)
with profile(activities=[ProfilerActivity.CPU]) as settled:
    train(ddp_model, optimizer, range(2, STEPS))

ddp_control, control_optimizer = accelerator.prepare(control_model, sgd(control_model))
control_grad = train(ddp_control, control_optimizer, range(STEPS), sync=ddp_control.no_sync)

# 3: nudge rank 1's replica AFTER construction; a per-step broadcast from rank 0 would erase the nudge.
ddp_nudged, nudged_optimizer = accelerator.prepare(nudged_model, sgd(nudged_model))
with torch.no_grad():
    nudged_model[0].bias += NUDGE * rank
train(ddp_nudged, nudged_optimizer, range(STEPS))
nudge_left_after_steps = spread_across_ranks(flat(nudged_model.parameters()))
torch.nn.parallel.DistributedDataParallel(nudged_model)  # constructing a wrapper broadcasts rank 0's weights
nudge_left_after_rewrap = spread_across_ranks(flat(nudged_model.parameters()))


# 5: a buffer (think BatchNorm's running mean) that differs per rank after construction, then one step.
def buffer_spread_after_one_step(wrap):
    set_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).to(accelerator.device)
    net.register_buffer("statistic", torch.zeros(4, device=accelerator.device))
    ddp = wrap(net)
    with torch.no_grad():
        net.statistic.fill_(float(rank))  # rank 0 holds 0.0, rank 1 holds 1.0
    with profile(activities=[ProfilerActivity.CPU]) as one_step:
        torch.nn.functional.mse_loss(ddp(inputs[0]), targets[0]).backward()
    return spread_across_ranks(net.statistic), sum(e.name == "c10d::broadcast_" for e in one_step.events())


buffer_spread, broadcasts_with_buffer = buffer_spread_after_one_step(accelerator.prepare)  # DDP's defaults
buffer_spread_no_sync, broadcasts_no_sync = buffer_spread_after_one_step(
    lambda net: torch.nn.parallel.DistributedDataParallel(net, forward_sync_buffers=False)
)

_claims.at_most(
    "buffers_broadcast_from_rank0_every_forward",
    measured=buffer_spread,
    control=buffer_spread_no_sync,
    tolerance=TOLERANCE,
    broadcasts_in_the_step=broadcasts_with_buffer,
    broadcasts_in_the_step_without_buffer_sync=broadcasts_no_sync,
)
_claims.at_most(
    "same_averaged_grad_on_every_rank",
    measured=spread_across_ranks(first_grad),
    control=spread_across_ranks(control_grad),
    tolerance=TOLERANCE,
    bytes_all_reduced_per_step_this_rank=sum(bytes_all_reduced) // STEPS,
)
_claims.at_most(
    "same_weights_after_step_on_every_rank",
    measured=spread_across_ranks(flat(ddp_model.parameters())),
    control=spread_across_ranks(flat(ddp_control.parameters())),
    tolerance=TOLERANCE,
    steps=STEPS,
)
_claims.at_least(
    "no_parameter_broadcast_after_construction",
    measured=nudge_left_after_steps,
    control=nudge_left_after_rewrap,
    bound=NUDGE / 2,
    nudge=NUDGE,
)
def collectives_other_than_all_reduce(trace):
    """c10d collectives in a profile that are not all-reduces (broadcast, reduce, gather, all-gather ...)."""
    return sum(e.name.startswith("c10d::") and e.name != "c10d::allreduce_" for e in trace.events())


_claims.equal(
    "no_rooted_collective_in_settled_steps",
    measured=collectives_other_than_all_reduce(settled),
    control=collectives_other_than_all_reduce(construction),
    expected=0,
    rooted_in_settled_steps=sum(e.name in ROOTED for e in settled.events()),
    construction_collectives=sorted(e.name for e in construction.events() if e.name.startswith("c10d::")),
    all_reduces_in_settled_steps=sum(e.name == "c10d::allreduce_" for e in settled.events()),
    settled_steps=STEPS - 2,
)
