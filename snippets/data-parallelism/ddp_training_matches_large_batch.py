# Several optimizer steps of data-parallel training end where one process training on the full batch
# ends: 2 ranks each take half of every batch of 48, DDP averages their gradients, and after 10 SGD
# steps the weights equal those of a single model trained on the 48-sample batches.
# Negative control: the same 10 steps under no_sync() (no gradient averaging): each rank follows its
# own half of the data and its weights drift away from the full-batch run.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/data-parallelism/ddp_training_matches_large_batch.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import contextlib
import copy

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed

import _claims

STEPS, BATCH, LR = 10, 48, 0.1  # 48 splits evenly over 2, 3 or 4 ranks
TOLERANCE = 1e-5  # float rounding after 10 steps is ~1e-7; a drifting replica is off by ~1e-1

accelerator = Accelerator()
set_seed(0)  # same initial weights and the same data on every rank
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)).to(accelerator.device)
inputs = torch.randn(STEPS, BATCH, 8, device=accelerator.device)
targets = torch.randn(STEPS, BATCH, 1, device=accelerator.device)
reference = copy.deepcopy(model)  # the single-device run
control = copy.deepcopy(model)  # the run without gradient averaging


def flat_weights(module):
    return torch.cat([p.detach().flatten() for p in module.parameters()])


def train(module, optimizer, shard, sync=contextlib.nullcontext):
    for step in range(STEPS):
        optimizer.zero_grad()
        with sync():  # no_sync must wrap the forward too: DDP arms the all-reduce in forward()
            loss = torch.nn.functional.mse_loss(module(inputs[step, shard]), targets[step, shard])
            accelerator.backward(loss)
        optimizer.step()


# Reference: ONE process, the whole batch of 48 at every step (no collectives involved).
train(reference, torch.optim.SGD(reference.parameters(), lr=LR), slice(0, BATCH))

# --- the mechanism: DDP averages the half-batch gradients, every rank applies the same step ---
rank, world = accelerator.process_index, accelerator.num_processes
half = slice(rank * BATCH // world, (rank + 1) * BATCH // world)  # 2 ranks: 24 of the 48 samples each
ddp_model, optimizer = accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=LR))
train(ddp_model, optimizer, half)

ddp_control, control_optimizer = accelerator.prepare(control, torch.optim.SGD(control.parameters(), lr=LR))
train(ddp_control, control_optimizer, half, sync=ddp_control.no_sync)  # each rank keeps its own gradient

final = flat_weights(accelerator.unwrap_model(ddp_model))
drifted = flat_weights(accelerator.unwrap_model(ddp_control))
_claims.at_most(
    "ddp_steps_match_full_batch_steps",
    measured=(final - flat_weights(reference)).abs().max().item(),
    control=(drifted - flat_weights(reference)).abs().max().item(),
    tolerance=TOLERANCE,
    steps=STEPS,
    samples_per_rank_per_step=half.stop - half.start,
    parameters=final.numel(),
)
