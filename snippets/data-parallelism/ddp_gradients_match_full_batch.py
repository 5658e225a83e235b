# Data parallelism is not "less accurate": 2 ranks on half batches, with DDP averaging their
# gradients, produce the gradient one process computes on the full batch (up to float rounding).
# Negative control: the same half-batch gradient without the all-reduce differs from it.
# And the compute is split, not repeated: over one pass of a prepared DataLoader (each rank gets its
# share of the 48 samples) the forward + backward FLOPs of all ranks add up to the one-process count.
# Negative control: the same loop over the DataLoader without prepare (no sharding): every rank runs
# all 48 samples, N times the FLOPs in total.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/data-parallelism/ddp_gradients_match_full_batch.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.flop_counter import FlopCounterMode

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


# Reference: one process, the whole batch of 48 (its forward + backward FLOPs counted by torch).
with FlopCounterMode(display=False) as single_counter:
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


# --- compute: the prepared DataLoader hands each rank its share of the 48 samples ---
def forward_backward_flops(batches):
    """torch's count of the forward + backward FLOPs of one pass over `batches`, and the samples seen."""
    samples = 0
    with FlopCounterMode(display=False) as counter:
        for x, y in batches:
            gradient(ddp_model, x, y)
            samples += len(x)
    return counter.get_total_flops(), samples


dataset = TensorDataset(inputs, targets)
rank_flops, rank_samples = forward_backward_flops(accelerator.prepare(DataLoader(dataset, batch_size=BATCH // world)))
# Control: the same loop over the DataLoader without prepare: no sharding, every rank runs all 48 samples.
unsharded_flops, _ = forward_backward_flops(DataLoader(dataset, batch_size=BATCH // world))
totals = torch.tensor([rank_flops, unsharded_flops], dtype=torch.float64, device=accelerator.device)
dist.all_reduce(totals)  # the work of all ranks together

_claims.equal(
    "forward_backward_flops_split_across_ranks",
    measured=int(totals[0]),
    control=int(totals[1]),
    expected=single_counter.get_total_flops(),
    flops_this_rank=rank_flops,
    samples_this_rank=rank_samples,
    world_size=world,
)
