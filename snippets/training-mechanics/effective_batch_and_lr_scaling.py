# Effective batch size = per-device batch x number of processes x gradient accumulation steps, and what
# that means for the learning rate. Linear regression, SGD, 2 ranks.
#   * One optimizer step with per-device batch 4, 2 processes and gradient_accumulation_steps=2 is the
#     step ONE process takes on a batch of 16 (4 x 2 x 2), to float rounding.
#   * One epoch of 64 samples: one process with batch 8 takes 8 steps at lr 0.05. Two ranks with
#     per-device batch 8 (effective 16) take 4 steps: at the same lr the weights move about half as far;
#     at lr x 2 (the linear scaling rule of Goyal et al. 2017) they move about as far.
# Negative controls: one process stepping on the per-device batch alone (4 samples); 2 ranks at the
# unscaled lr.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/training-mechanics/effective_batch_and_lr_scaling.py
import copy

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset

import _claims

PER_DEVICE, ACCUMULATION, LR = 4, 2, 0.05
set_seed(0)
true_w = torch.randn(8, 1)
inputs = torch.randn(64, 8)
targets = inputs @ true_w + 0.1 * torch.randn(64, 1)
model = torch.nn.Linear(8, 1)


def flat(module):
    return torch.cat([p.detach().flatten() for p in module.parameters()])


def loss_fn(net, x, y):
    return torch.nn.functional.mse_loss(net(x), y)  # a MEAN over the batch


def one_process_sgd(rows_per_step, lr):
    """One process: an SGD step on each listed block of rows, in order."""
    net = copy.deepcopy(model)
    sgd = torch.optim.SGD(net.parameters(), lr=lr)
    for rows in rows_per_step:
        loss_fn(net, inputs[rows], targets[rows]).backward()
        sgd.step()
        sgd.zero_grad()
    return flat(net)


def distributed_sgd(accelerator, n_samples, per_device, lr):
    """The same data through accelerator.prepare: returns the final weights and optimizer steps."""
    net = copy.deepcopy(model)
    loader = DataLoader(TensorDataset(inputs[:n_samples], targets[:n_samples]), batch_size=per_device)
    net, sgd, loader = accelerator.prepare(net, torch.optim.SGD(net.parameters(), lr=lr), loader)
    steps = 0
    for x, y in loader:
        with accelerator.accumulate(net):
            accelerator.backward(loss_fn(net, x, y))
            steps += accelerator.sync_gradients
            sgd.step()
            sgd.zero_grad()
    return flat(accelerator.unwrap_model(net)), steps, loader.total_batch_size


# --- 1. one optimizer step = one process on per_device x processes x accumulation samples ---
accumulating = Accelerator(gradient_accumulation_steps=ACCUMULATION)
effective = PER_DEVICE * accumulating.num_processes * ACCUMULATION  # 16
weights, steps, per_step_of_loader = distributed_sgd(accumulating, effective, PER_DEVICE, LR)
_claims.at_most(
    "one_step_equals_effective_batch",
    measured=(weights - one_process_sgd([slice(0, effective)], LR)).abs().max().item(),
    control=(weights - one_process_sgd([slice(0, PER_DEVICE)], LR)).abs().max().item(),  # per-device batch only
    tolerance=1e-6,
    effective_batch=effective,
    optimizer_steps=steps,
    loader_total_batch_size=per_step_of_loader,  # per_device x processes, before accumulation
)

# --- 2. the same epoch with a 2x bigger effective batch: scale the lr, or move half as far ---
accelerator = Accelerator()
start = flat(model)
reference = one_process_sgd([slice(i, i + 8) for i in range(0, 64, 8)], LR)  # 8 steps of batch 8
unscaled, unscaled_steps, _ = distributed_sgd(accelerator, 64, 8, LR)  # 4 steps of effective batch 16
scaled, scaled_steps, _ = distributed_sgd(accelerator, 64, 8, LR * accelerator.num_processes)


def progress(weights):  # how far the weights moved in the epoch, relative to the one-process run
    return ((weights - start).norm() / (reference - start).norm()).item()


_claims.between(
    "scaled_lr_keeps_progress_per_epoch",
    measured=progress(scaled),  # lr x 2
    control=progress(unscaled),  # the one-process lr, unchanged
    low=0.9,
    high=1.1,
    optimizer_steps_one_process=8,
    optimizer_steps_two_ranks=scaled_steps,
    distance_to_one_process_scaled=(scaled - reference).norm().item(),
    distance_to_one_process_unscaled=(unscaled - reference).norm().item(),
)
