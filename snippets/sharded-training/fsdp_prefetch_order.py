# When FSDP (torch's FullyShardedDataParallel, FSDP1) issues each unit's all-gather relative to the
# computation it overlaps with, under backward_prefetch (BACKWARD_PRE, the default; BACKWARD_POST; None)
# and forward_prefetch, on 2 gloo ranks.
# Three Linear layers, each its own FSDP unit inside a root unit with no parameters of its own. Each unit
# ends with an identity autograd function that records when the unit's forward finished and when its
# backward (gradient computation) starts; the all-gathers (dist.all_gather on CPU) and reduce-scatters
# (dist.reduce_scatter_single) are recorded by wrapping torch.distributed's functions. The unit each
# collective belongs to is known from its size (the layers differ in size and need no padding).
# We count, over the 2 units that have a next unit to prefetch:
#   backward, BACKWARD_PRE:  the previous unit's all-gather issued before this unit's gradient computation;
#   backward, BACKWARD_POST: issued after this unit's gradient computation but before its reduce-scatter;
#   forward, forward_prefetch=True: the next unit's all-gather issued before this unit's forward finished
#   (the second iteration: the prefetch follows the order recorded in the first).
# Negative controls: backward_prefetch=None (the next all-gather waits for the next unit's pre-backward
# hook, after this unit's reduce-scatter) and forward_prefetch left at its default.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/sharded-training/fsdp_prefetch_order.py
import contextlib

import torch
import torch.distributed as dist
from accelerate import Accelerator
from torch.distributed.fsdp import BackwardPrefetch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

import _claims

WIDTHS = (8, 16, 24, 32)  # Linear(8,16), Linear(16,24), Linear(24,32): 144, 408 and 800 parameters
accelerator = Accelerator()
events = []


class Mark(torch.autograd.Function):
    """Identity that records the end of a unit's forward and the start of its gradient computation."""

    @staticmethod
    def forward(ctx, x, unit):
        ctx.unit = unit
        events.append(("forward_done", unit))
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        events.append(("backward_starts", ctx.unit))
        return grad, None


class Unit(torch.nn.Module):
    def __init__(self, index):
        super().__init__()
        self.index, self.linear = index, torch.nn.Linear(WIDTHS[index], WIDTHS[index + 1])

    def forward(self, x):
        return Mark.apply(self.linear(x), self.index)


UNITS = len(WIDTHS) - 1
unit_of_numel = {WIDTHS[i] * WIDTHS[i + 1] + WIDTHS[i + 1]: i for i in range(UNITS)}


@contextlib.contextmanager
def recording():
    originals = {name: getattr(dist, name) for name in ("all_gather", "reduce_scatter_single")}

    def all_gather(tensor_list, tensor, *args, **kwargs):  # FSDP1 on CPU gathers into a list of chunks
        events.append(("all_gather", unit_of_numel[sum(t.numel() for t in tensor_list)]))
        return originals["all_gather"](tensor_list, tensor, *args, **kwargs)

    def reduce_scatter_single(output, input, *args, **kwargs):
        events.append(("reduce_scatter", unit_of_numel[input.numel()]))
        return originals["reduce_scatter_single"](output, input, *args, **kwargs)

    dist.all_gather, dist.reduce_scatter_single = all_gather, reduce_scatter_single
    try:
        yield
    finally:
        dist.all_gather, dist.reduce_scatter_single = originals["all_gather"], originals["reduce_scatter_single"]


def trace(**fsdp_kwargs):
    """Events of the second training iteration of a freshly wrapped model."""
    torch.manual_seed(0)
    units = [FSDP(Unit(i), device_id=torch.device("cpu"), **fsdp_kwargs) for i in range(UNITS)]
    model = FSDP(torch.nn.Sequential(*units), device_id=torch.device("cpu"), **fsdp_kwargs)
    for _ in range(2):
        events.clear()
        with recording():
            model(torch.randn(4, WIDTHS[0])).sum().backward()
    return list(events)


def position(sequence, event, after=0):
    return sequence.index(event, after)


def backward_phase(sequence):
    last_forward = max(i for i, (kind, _) in enumerate(sequence) if kind == "forward_done")
    return sequence[last_forward + 1 :]


def prefetched_before_compute(sequence):
    """Units whose predecessor's all-gather was issued before the unit's own gradient computation."""
    backward = backward_phase(sequence)
    return sum(
        position(backward, ("all_gather", unit - 1)) < position(backward, ("backward_starts", unit))
        for unit in range(1, UNITS)
    )


def prefetched_after_compute_before_reduce_scatter(sequence):
    backward = backward_phase(sequence)
    return sum(
        position(backward, ("backward_starts", unit))
        < position(backward, ("all_gather", unit - 1))
        < position(backward, ("reduce_scatter", unit))
        for unit in range(1, UNITS)
    )


def forward_prefetched(sequence):
    """Units whose successor's all-gather was issued before the unit's forward finished."""
    return sum(
        position(sequence, ("all_gather", unit + 1)) < position(sequence, ("forward_done", unit))
        for unit in range(UNITS - 1)
    )


default = trace()  # backward_prefetch and forward_prefetch left out
post = trace(backward_prefetch=BackwardPrefetch.BACKWARD_POST)
no_prefetch = trace(backward_prefetch=None)
forward = trace(forward_prefetch=True)
details = dict(default=default, backward_post=post, no_prefetch=no_prefetch, forward_prefetch=forward)

_claims.equal(
    "default_backward_prefetch_is_pre",
    measured=[prefetched_before_compute(default), prefetched_after_compute_before_reduce_scatter(default)],
    control=[prefetched_before_compute(no_prefetch), prefetched_after_compute_before_reduce_scatter(no_prefetch)],
    expected=[UNITS - 1, 0],
    **details,
)
_claims.equal(
    "backward_post_prefetches_after_compute",
    measured=[prefetched_before_compute(post), prefetched_after_compute_before_reduce_scatter(post)],
    control=[prefetched_before_compute(no_prefetch), prefetched_after_compute_before_reduce_scatter(no_prefetch)],
    expected=[0, UNITS - 1],
)
_claims.equal(
    "forward_prefetch_issues_next_all_gather_early",
    measured=forward_prefetched(forward),
    control=forward_prefetched(default),  # forward_prefetch left at its default
    expected=UNITS - 1,
)
