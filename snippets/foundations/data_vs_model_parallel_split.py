# Data parallelism splits the DATA, model (tensor) parallelism splits the PARAMETERS, and neither
# "merges the results at the end": ranks talk to each other inside every step.
#   - data parallel: every rank holds all parameters and sees a distinct shard of the samples;
#     after each step the replicas are identical because DDP averaged the gradients.
#   - tensor parallel: under torch's ColwiseParallel every rank holds a distinct slice of one Linear
#     layer and computes on the SAME samples; with the layer split by hand, an all_gather of the
#     partial outputs equals the dense layer.
# Negative controls: an unprepared loader (both ranks read every sample), no_sync (replicas drift
# apart), the same ownership count on the layer without torch's ColwiseParallel plan (every rank holds
# it whole, as a replica does), and the hand-split column-parallel output without the all_gather (half
# of the features are missing).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/foundations/data_vs_model_parallel_split.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import contextlib
import copy

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module
from torch.utils.data import DataLoader, TensorDataset

import _claims

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
device = accelerator.device
set_seed(0)  # same initial weights and same data on every rank

N_SAMPLES, IN_FEATURES, OUT_FEATURES = 16, 8, 6
sample_ids = torch.arange(N_SAMPLES)
inputs = torch.randn(N_SAMPLES, IN_FEATURES)
targets = torch.randn(N_SAMPLES, OUT_FEATURES)
dataset = TensorDataset(sample_ids, inputs, targets)


def ids_seen(loader):
    return {int(i) for ids, _, _ in loader for i in ids}


def overlap_between_ranks(local_ids):
    everyone = [None] * world
    dist.all_gather_object(everyone, sorted(local_ids))  # every rank calls it: no hang
    return len(set.intersection(*(set(ids) for ids in everyone)))


def max_difference_between_ranks(flat):
    everyone = accelerator.gather(flat.unsqueeze(0))  # shape (world, n)
    return (everyone - everyone[0]).abs().max().item()


# ---------------- data parallelism: split the data, replicate the model ----------------
dense = torch.nn.Linear(IN_FEATURES, OUT_FEATURES)
full_parameter_count = sum(p.numel() for p in dense.parameters())
ddp_model = torch.nn.Linear(IN_FEATURES, OUT_FEATURES)
ddp_model.load_state_dict(dense.state_dict())
optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
loader = DataLoader(dataset, batch_size=4)
ddp_model, optimizer, dp_loader = accelerator.prepare(ddp_model, optimizer, loader)

dp_overlap = overlap_between_ranks(ids_seen(dp_loader))
no_shard_overlap = overlap_between_ranks(ids_seen(loader))  # control: a loader prepare() never saw
dp_parameters_per_rank = sum(p.numel() for p in ddp_model.parameters())


def train_steps(sync):
    drift_per_step = []
    for _, x, y in dp_loader:  # two steps of 4 samples per rank
        optimizer.zero_grad()
        # no_sync must cover the forward too: DDP decides at forward time whether backward all-reduces
        with contextlib.nullcontext() if sync else ddp_model.no_sync():
            loss = torch.nn.functional.mse_loss(ddp_model(x), y)
            accelerator.backward(loss)
        optimizer.step()
        flat = torch.cat([p.detach().flatten() for p in ddp_model.parameters()])
        drift_per_step.append(max_difference_between_ranks(flat))
    return max(drift_per_step), len(drift_per_step)


synced_drift, steps = train_steps(sync=True)
ddp_model.module.load_state_dict(dense.state_dict())  # same start for the control
unsynced_drift, _ = train_steps(sync=False)

# ---------------- tensor (model) parallelism: split the parameters, replicate the data ----------------
columns = slice(rank * OUT_FEATURES // world, (rank + 1) * OUT_FEATURES // world)
weight_shard = dense.weight.detach()[columns].to(device)  # this rank's output features only, split by hand
bias_shard = dense.bias.detach()[columns].to(device)

# Which elements of the layer does each rank hold once torch's own column-parallel plan has split it?
# A copy of the layer whose every element holds its own index: the values a rank keeps name the
# elements it owns. ColwiseParallel (torch.distributed.tensor.parallel) shards weight and bias by output
# rows; each rank's share is its DTensor's to_local().
numbered = torch.nn.Linear(IN_FEATURES, OUT_FEATURES).to(device)
with torch.no_grad():
    element_ids = torch.arange(full_parameter_count, dtype=torch.float32, device=device)
    numbered.weight.copy_(element_ids[: dense.weight.numel()].view_as(dense.weight))
    numbered.bias.copy_(element_ids[dense.weight.numel() :])
mesh = init_device_mesh(device.type, (world,))
colwise = parallelize_module(copy.deepcopy(numbered), mesh, ColwiseParallel())


def held_elements(module):
    local = [p.to_local() if isinstance(p, DTensor) else p for p in module.parameters()]
    return {int(value) for tensor in local for value in tensor.detach().flatten().tolist()}


tp_parameter_overlap = overlap_between_ranks(held_elements(colwise))
tp_parameters_per_rank = len(held_elements(colwise))
# Control: the same layer without parallelize_module, every rank holding it whole, as a replica does.
dp_parameter_overlap = overlap_between_ranks(held_elements(numbered))
# The samples it computes on: its local output has a row for every one of the 16 samples, on every rank.
colwise_local_output_shape = list(colwise(inputs.to(device)).shape)

x = inputs.to(device)  # EVERY rank computes on all 16 samples
local_out = x @ weight_shard.T + bias_shard  # (16, 3): half of the output features
pieces = [torch.empty_like(local_out) for _ in range(world)]
dist.all_gather(pieces, local_out)  # the per-layer communication tensor parallelism needs
gathered = torch.cat(pieces, dim=1)
reference = dense.to(device)(x).detach()
without_gather = torch.zeros_like(reference)
without_gather[:, columns] = local_out  # all a rank knows if it skips the all_gather

_claims.equal(
    "data_parallel_ranks_see_disjoint_samples",
    measured=dp_overlap,
    control=no_shard_overlap,
    expected=0,
    samples=N_SAMPLES,
    samples_per_rank=len(ids_seen(dp_loader)),
)
_claims.at_most(
    "data_parallel_replicas_synchronised_every_step",
    measured=synced_drift,
    control=unsynced_drift,
    tolerance=1e-6,
    steps=steps,
    parameters_per_rank=dp_parameters_per_rank,
)
_claims.equal(
    "tensor_parallel_ranks_hold_disjoint_parameter_slices",
    measured=tp_parameter_overlap,
    control=dp_parameter_overlap,
    expected=0,
    dense_parameters=full_parameter_count,
    tensor_parallel_parameters_per_rank=tp_parameters_per_rank,
    data_parallel_parameters_per_rank=dp_parameters_per_rank,
    colwise_local_output_shape=colwise_local_output_shape,  # (samples, this rank's output features)
)
_claims.at_most(
    "column_parallel_all_gather_equals_dense",
    measured=(gathered - reference).abs().max().item(),
    control=(without_gather - reference).abs().max().item(),
    tolerance=1e-6,
    local_output_shape=list(local_out.shape),
    gathered_output_shape=list(gathered.shape),
)
