# Gradient accumulation with Accelerate: with gradient_accumulation_steps=4 and
# `with accelerator.accumulate(model):`, 4 micro-batches of 8 samples per rank (2 ranks) make the
# same optimizer steps as one process on batches of 64, and DDP all-reduces once per 4 micro-batches.
# Negative controls: loss.backward() instead of accelerator.backward(loss) (the loss is not divided
# by 4, so the accumulated gradient is 4 times too large); the same loop without accumulate() (an
# all-reduce and an optimizer step after every micro-batch).
#
#   accelerate launch --multi_gpu --num_processes 2 snippets/accumulate_matches_big_batch.py
#   (on a CPU-only machine export ACCELERATE_USE_CPU=true first)
import contextlib
import copy

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.utils.data import DataLoader, TensorDataset

import _claims

ACCUMULATION, MICRO_BATCH, LR = 4, 8, 0.1
TOLERANCE = 1e-6  # float rounding is ~1e-8; a 4x gradient moves the weights by ~1e-1

accelerator = Accelerator(gradient_accumulation_steps=ACCUMULATION)
set_seed(0)
inputs, targets = torch.randn(128, 8), torch.randn(128, 1)
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))


def flat_weights(module):
    return torch.cat([p.detach().flatten() for p in module.parameters()])


def train(use_accumulate=True, divide_loss=True):
    """One epoch: 128 samples, 8 micro-batches of 8 per rank. Returns weights, all-reduces, steps."""
    net = copy.deepcopy(model)  # every run starts from the same weights
    loader = DataLoader(TensorDataset(inputs, targets), batch_size=MICRO_BATCH)  # not shuffled: see below
    net, optimizer, loader = accelerator.prepare(net, torch.optim.SGD(net.parameters(), lr=LR), loader)
    allreduces = []

    def counting_hook(state, bucket):  # called once per gradient bucket that DDP all-reduces
        allreduces.append(bucket.index())
        return allreduce_hook(state, bucket)  # torch's reference hook: divide by world size, all-reduce

    net.register_comm_hook(state=None, hook=counting_hook)
    steps = 0
    for x, y in loader:
        with accelerator.accumulate(net) if use_accumulate else contextlib.nullcontext():
            loss = torch.nn.functional.mse_loss(net(x), y)
            if divide_loss:
                accelerator.backward(loss)  # divides the loss by gradient_accumulation_steps
            else:
                loss.backward()
            steps += accelerator.sync_gradients  # AcceleratedOptimizer.step acts only when this is True
            optimizer.step()
            optimizer.zero_grad()
    return flat_weights(accelerator.unwrap_model(net)), len(allreduces), steps


# Reference: ONE process, plain SGD on batches of 64. The prepared loader deals batch i to rank i % 2,
# so the 4 micro-batches of both ranks in one accumulation window are 64 consecutive samples.
reference = copy.deepcopy(model)
sgd = torch.optim.SGD(reference.parameters(), lr=LR)
for window in range(128 // 64):
    rows = slice(window * 64, (window + 1) * 64)
    torch.nn.functional.mse_loss(reference(inputs[rows]), targets[rows]).backward()
    sgd.step()
    sgd.zero_grad()

accumulated, allreduces, steps = train()
undivided, _, _ = train(divide_loss=False)
every_batch, allreduces_without, steps_without = train(use_accumulate=False)

_claims.at_most(
    "accumulated_steps_match_big_batch",
    measured=(accumulated - flat_weights(reference)).abs().max().item(),
    control=(undivided - flat_weights(reference)).abs().max().item(),
    tolerance=TOLERANCE,
    micro_batches_per_rank=len(inputs) // MICRO_BATCH // accelerator.num_processes,
    optimizer_steps=steps,
    reference_batch=64,
)
_claims.equal(
    "one_allreduce_per_window",
    measured=allreduces,
    control=allreduces_without,
    expected=2,  # 8 micro-batches per rank / 4 per window, one gradient bucket each
    optimizer_steps_with_accumulate=steps,
    optimizer_steps_without=steps_without,
    max_weight_diff_without_accumulate=(every_batch - flat_weights(reference)).abs().max().item(),
)
