# A straggler sets the pace of data-parallel training: when one rank's forward takes DELAY longer,
# every other rank's step takes about DELAY longer too, because DDP's gradient all-reduce in backward
# waits for the slowest rank. Negative control: the same loop with the same straggler, under
# accelerator.no_sync (DDP skips the gradient all-reduce), where the fast ranks do not wait.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/collectives/straggler_sets_the_pace.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import contextlib
import time

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed

import _claims

DELAY_S = 0.15  # extra work on the last rank, per step: think of a slower GPU or a slow data loader
STEPS = 4

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
straggler = world - 1
set_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
model, optimizer = accelerator.prepare(model, optimizer)
x, y = torch.randn(16, 32, device=accelerator.device), torch.randn(16, 1, device=accelerator.device)


def seconds_per_step(slow_rank, all_reduce=True):
    """Mean seconds per whole step, and per step inside accelerator.backward, on this rank."""
    accelerator.wait_for_everyone()  # all ranks start the clock together
    started, in_backward = time.perf_counter(), 0.0
    for _ in range(STEPS):
        if rank == slow_rank:
            time.sleep(DELAY_S)  # the slow rank's forward; the others have nothing to do here
        with contextlib.nullcontext() if all_reduce else accelerator.no_sync(model):
            loss = torch.nn.functional.mse_loss(model(x), y)
            backward_started = time.perf_counter()
            accelerator.backward(loss)  # DDP all-reduces the gradients: a collective every rank must join
            in_backward += time.perf_counter() - backward_started
        optimizer.step()
        optimizer.zero_grad()
    return (time.perf_counter() - started) / STEPS, in_backward / STEPS


seconds_per_step(slow_rank=None)  # warm-up: the first DDP backward builds its buckets
with_straggler, backward_with_straggler = seconds_per_step(slow_rank=straggler)
without_all_reduce, _ = seconds_per_step(slow_rank=straggler, all_reduce=False)  # same straggler, no sync
without_straggler, _ = seconds_per_step(slow_rank=None)
accelerator.wait_for_everyone()

if rank != straggler:  # the straggler's own step contains its sleep anyway; the question is the others
    # The fast rank's step time in units of the straggler's delay: about 1, though it never slept.
    _claims.between(
        "every_rank_waits_for_the_straggler",
        measured=with_straggler / DELAY_S,
        control=without_all_reduce / DELAY_S,
        low=0.8,
        high=1.6,
        straggler_rank=straggler,
        step_seconds=with_straggler,
        backward_seconds=backward_with_straggler,  # where the wait lands (gloo: inside backward)
        step_seconds_without_all_reduce=without_all_reduce,
        step_seconds_without_straggler=without_straggler,
    )
