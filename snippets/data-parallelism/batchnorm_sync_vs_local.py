# BatchNorm under DDP: each rank normalises its 16 samples with ITS OWN batch mean and variance, so the
# averaged DDP gradient is not the gradient one process gets on all 32 samples. Synchronising the
# statistics over the ranks (what torch.nn.SyncBatchNorm does on GPUs) gives the full-batch gradient.
# torch.nn.SyncBatchNorm itself refuses CPU modules, so here a few lines of BatchNorm with all_reduce
# (torch.distributed.nn.functional.all_reduce, which also all-reduces on the way back) stand in for it.
# Negative controls: plain BatchNorm1d under DDP (per-rank statistics); the same model not converted
# by convert_sync_batchnorm (prepare() accepts it on CPU).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/data-parallelism/batchnorm_sync_vs_local.py
import copy

import torch
import torch.distributed.nn.functional as dist_nn
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes


class HandSyncBatchNorm(torch.nn.BatchNorm1d):
    """BatchNorm1d whose training statistics are taken over the samples of ALL ranks."""

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        count = dist_nn.all_reduce(torch.tensor([float(x.shape[0])]))  # 32 samples in all
        mean = dist_nn.all_reduce(x.sum(0)) / count
        var = dist_nn.all_reduce(((x - mean) ** 2).sum(0)) / count  # biased, as BatchNorm normalises
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


def make_model(norm=torch.nn.BatchNorm1d):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), norm(16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


torch.manual_seed(42)
inputs, targets = torch.randn(32, 8), torch.randn(32, 1)  # the same global batch on both ranks
shard = slice(rank * 16, (rank + 1) * 16)  # rank r trains on its 16 samples


def grads(module):
    return torch.cat([p.grad.flatten() for p in module.parameters()])


# Reference: ONE process, ordinary BatchNorm, all 32 samples in one batch.
reference = make_model()
torch.nn.functional.mse_loss(reference(inputs), targets).backward()


def ddp_gap(norm):
    """Largest |DDP-averaged gradient - full-batch gradient| for a model using `norm`, and the model."""
    model = accelerator.prepare(make_model(norm))
    torch.nn.functional.mse_loss(model(inputs[shard]), targets[shard]).backward()
    return (grads(model.module) - grads(reference)).abs().max().item(), model


def running_mean_spread(model):
    """Largest difference between the ranks' BatchNorm running_mean (a collective)."""
    everyone = accelerator.gather(model.module[1].running_mean.unsqueeze(0))
    return (everyone - everyone[0]).abs().max().item()


synced_gap, _ = ddp_gap(HandSyncBatchNorm)
local_gap, local_model = ddp_gap(torch.nn.BatchNorm1d)
# Running statistics: DDP copies rank 0's buffers to every rank BEFORE a forward, then each rank's forward
# updates them with its own batch; so right after the training step the ranks differ ...
stats_spread_after_step = running_mean_spread(local_model)
with torch.no_grad():  # ... until the next forward through the wrapper (here in eval mode, no update)
    local_model.eval()(inputs[shard])
stats_spread_after_next_forward = running_mean_spread(local_model)

# torch.nn.SyncBatchNorm: convert_sync_batchnorm swaps every BatchNorm*d layer ...
plain = make_model()
with torch.no_grad():  # a weight that is not BatchNorm's default of ones, so "kept" can be told from "re-initialised"
    plain[1].weight.copy_(torch.linspace(0.5, 2.0, 16))
converted = torch.nn.SyncBatchNorm.convert_sync_batchnorm(copy.deepcopy(plain))
count_sync = lambda m: sum(isinstance(x, torch.nn.SyncBatchNorm) for x in m.modules())  # noqa: E731
# ... but DDP refuses it on CPU (DistributedDataParallel._passing_sync_batchnorm_handle).
def prepare_error(model):
    try:
        accelerator.prepare(model)
        return ""
    except ValueError as error:
        return str(error)


converted_error, plain_error = prepare_error(converted), prepare_error(plain)
try:  # and the layer itself, called directly in training mode with a process group, refuses CPU input
    converted.train()(inputs[shard])
    forward_error = ""
except ValueError as error:
    forward_error = str(error)

_claims.at_most(
    "synced_statistics_match_full_batch",
    measured=synced_gap,
    control=local_gap,
    tolerance=1e-5,
    samples_per_rank=16,
    full_batch=32,
)
_claims.at_least(
    "running_stats_differ_until_next_forward",
    measured=stats_spread_after_step,
    control=stats_spread_after_next_forward,
    bound=1e-4,
)
_claims.equal(
    "syncbatchnorm_refused_on_cpu",
    measured=int(converted_error == "SyncBatchNorm layers only work with GPU modules"),
    control=int(plain_error == "SyncBatchNorm layers only work with GPU modules"),
    expected=1,
    prepare_error=converted_error,
    direct_forward_error=forward_error,
)
_claims.equal(
    "convert_sync_batchnorm_swaps_layers",
    # SyncBatchNorm layers holding the original (non-default) weight: 0 if the conversion re-initialised it
    measured=count_sync(converted) * int(torch.equal(converted[1].weight, plain[1].weight)),
    control=count_sync(plain),
    expected=1,
    sync_layers=count_sync(converted),
    weights_kept=bool(torch.equal(converted[1].weight, plain[1].weight)),
)
