# Synchronous data parallelism: DDP averages the gradients in every backward, so after every optimizer
# step every rank holds exactly the same weights; no rank ever computes on stale parameters. Measured
# by all-gathering the weights after each of 5 steps on different data per rank.
# Negative control: the same 5 steps with forward and backward inside no_sync (each rank applies only
# its own gradient, as an asynchronous worker would): the replicas drift apart.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/data-parallelism/ddp_replicas_stay_identical.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import contextlib
import copy

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import set_seed

import _claims

STEPS = 5
accelerator = Accelerator()
set_seed(0)
reference = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))


def largest_gap_between_replicas(synchronise):
    """Train 5 SGD steps on rank-specific data; the largest weight difference between ranks after any step."""
    model = copy.deepcopy(reference).to(accelerator.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    generator = torch.Generator().manual_seed(100 + accelerator.process_index)  # each rank its own data
    worst = 0.0
    for _ in range(STEPS):
        x, y = torch.randn(8, 16, generator=generator), torch.randn(8, 1, generator=generator)
        with contextlib.nullcontext() if synchronise else accelerator.no_sync(model):
            accelerator.backward(torch.nn.functional.mse_loss(model(x.to(accelerator.device)), y.to(accelerator.device)))
        optimizer.step()
        optimizer.zero_grad()
        weights = torch.cat([p.detach().flatten() for p in model.parameters()])
        replicas = [torch.empty_like(weights) for _ in range(accelerator.num_processes)]
        dist.all_gather(replicas, weights)
        worst = max(worst, max((replica - replicas[0]).abs().max().item() for replica in replicas))
    return worst


_claims.equal(
    "ddp_replicas_identical_after_every_step",
    measured=largest_gap_between_replicas(synchronise=True),
    control=largest_gap_between_replicas(synchronise=False),
    expected=0.0,
    steps=STEPS,
)
