# Chen et al. 2016 (arXiv:1604.06174): checkpoint a chain of n layers in segments of about sqrt(n) layers,
# and the activations held for backward grow as O(sqrt(n)) instead of O(n), for about one extra forward.
# Measured: a chain of n Linear+Tanh layers (batch 4, width 16, float32) runs one forward under
# torch.utils.checkpoint.checkpoint_sequential with k segments (use_reentrant=False), and a
# saved_tensors_hooks pair records the distinct storages autograd keeps for backward (weights excluded;
# a tensor saved by two operations is counted once). That is what is held when backward starts: the
# inputs of the k-1 checkpointed segments and the activations of the last, uncheckpointed one.
# Model (stated on the page): that is the peak, because during backward each earlier segment is
# recomputed while only the checkpoints before it are held, and no segment is longer than the last one
# here (segment sizes are equal). Also counted: forward calls per layer in one step (the recomputation).
# Negative control: the same chains without checkpointing (everything kept, one forward).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/memory/sqrt_n_checkpoint_segments.py
import math

import torch
from accelerate import Accelerator
from torch.utils.checkpoint import checkpoint_sequential

import _claims

BATCH, WIDTH = 4, 16
accelerator = Accelerator()


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear, self.calls = torch.nn.Linear(WIDTH, WIDTH), 0

    def forward(self, x):
        self.calls += 1
        return torch.tanh(self.linear(x))


def one_step(layers, segments):
    """(activation bytes held for backward after the forward, forward calls per layer in the step)."""
    torch.manual_seed(0)
    chain = torch.nn.Sequential(*[Layer() for _ in range(layers)])
    weights = {p.untyped_storage().data_ptr() for p in chain.parameters()}
    held = {}

    def pack(tensor):
        pointer = tensor.untyped_storage().data_ptr()
        if pointer not in weights:
            held[pointer] = tensor.untyped_storage().nbytes()
        return tensor

    x = torch.randn(BATCH, WIDTH, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = chain(x) if segments is None else checkpoint_sequential(chain, segments, x, use_reentrant=False)
    out.sum().backward()
    return sum(held.values()), sum(layer.calls for layer in chain) / layers


SIZES = (9, 36, 144)
activation_unit = BATCH * WIDTH * 4  # one layer's output, in bytes
sqrt_runs = {n: one_step(n, math.isqrt(n)) for n in SIZES}  # k = sqrt(n) segments of sqrt(n) layers
plain_runs = {n: one_step(n, None) for n in SIZES}
sweep_36 = {k: one_step(36, k)[0] / activation_unit for k in (2, 3, 6, 12, 18)}
details = dict(
    held_in_layer_outputs_sqrt=({n: sqrt_runs[n][0] / activation_unit for n in SIZES}),
    held_in_layer_outputs_plain=({n: plain_runs[n][0] / activation_unit for n in SIZES}),
    segments_sweep_at_36_layers=sweep_36,
)
_claims.at_most(
    "sqrt_segments_grow_as_sqrt_n",
    measured=sqrt_runs[144][0] / sqrt_runs[9][0],  # 16x the layers
    control=plain_runs[144][0] / plain_runs[9][0],  # the same chains without checkpointing
    tolerance=4.5,  # sqrt(16) = 4, plus the segment-count offset
    **details,
)
_claims.between(
    "sqrt_segments_cost_one_extra_forward",
    measured=sqrt_runs[144][1],  # forward calls per layer in one training step, 144 layers, 12 segments
    control=plain_runs[144][1],
    low=1.9,
    high=2.0,  # every segment but the last is run again in backward: 2 - 1/12
    forward_calls_per_layer_sqrt=({n: sqrt_runs[n][1] for n in SIZES}),
)
