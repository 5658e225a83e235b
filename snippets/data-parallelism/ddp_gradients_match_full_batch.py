# Data parallelism is not "less accurate": 2 ranks on half batches, with DDP averaging their
# gradients, produce the gradient one process computes on the full batch (up to float rounding).
# Negative control: the same half-batch gradient without the all-reduce differs from it.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/data-parallelism/ddp_gradients_match_full_batch.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed

import _claims

BATCH = 48  # splits evenly over 2, 3 or 4 ranks: equal shards, so the mean of shard means is the batch mean
TOLERANCE = 1e-6  # float32 sums in a different order differ by ~1e-7, a wrong gradient by ~1e-1

accelerator = Accelerator()  # CPU or GPU: the launcher's environment decides
set_seed(0)  # same weights and same full batch on every rank
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).to(accelerator.device)
inputs = torch.randn(BATCH, 8, device=accelerator.device)
targets = torch.randn(BATCH, 1, device=accelerator.device)


def gradient(module, x, y):
    module.zero_grad()
    loss = torch.nn.functional.mse_loss(module(x), y)  # a mean over the batch, as in real training
    accelerator.backward(loss)  # plain loss.backward() here: no scaler, no accumulation
    return torch.cat([p.grad.flatten() for p in module.parameters()])


# Reference: one process, the whole batch of 48.
full_batch_grad = gradient(model, inputs, targets).clone()

# --- the mechanism: prepare() wraps the model in DDP; backward() all-reduces and averages ---
ddp_model = accelerator.prepare(model)
rank, world = accelerator.process_index, accelerator.num_processes
shard = slice(rank * BATCH // world, (rank + 1) * BATCH // world)  # 2 ranks: 24 of the 48 samples each
averaged_grad = gradient(ddp_model, inputs[shard], targets[shard])

# Control: the same half batch, no all-reduce (no_sync skips the gradient averaging).
with ddp_model.no_sync():
    local_grad = gradient(ddp_model, inputs[shard], targets[shard])

_claims.at_most(
    "averaged_grads_match_full_batch",
    measured=(averaged_grad - full_batch_grad).abs().max().item(),
    control=(local_grad - full_batch_grad).abs().max().item(),
    tolerance=TOLERANCE,
    world_size=world,
    samples_per_rank=shard.stop - shard.start,
)
