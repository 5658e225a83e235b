# What ZeRO-Offload moves over PCIe each step, per GPU, and how sharding changes it: the fp16 gradient
# shard goes to the CPU (which runs the optimizer on its fp32 states) and the updated fp16 parameter shard
# comes back, 2 + 2 bytes per parameter the rank owns. The shard each rank owns is read from torch's
# FSDP2 (fully_shard on a CPU device mesh, the ZeRO-3 layout), on 2 ranks. Negative control: the same
# model unsharded, where every rank would move all parameters. Also recorded (not judged): how long
# torch's Adam takes on this CPU for the rank's shard, and the break-even tokens per GPU of a stated
# PCIe/compute model.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/sharded-training/offload_traffic_per_rank.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import copy
import time

import torch
from accelerate import Accelerator
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

import _claims

accelerator = Accelerator()
world = accelerator.num_processes
FP16_BYTES = 2
# Model assumptions (stated, not measured): one GPU's sustained training FLOP/s and its own PCIe link.
GPU_FLOPS = 400e12  # e.g. an H100-class GPU at ~40% of its dense bf16 peak
PCIE_BYTES_PER_S = 25e9  # PCIe 4.0 x16, effective, each direction

torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(4)])
parameters = sum(p.numel() for p in model.parameters())

sharded = copy.deepcopy(model)
mesh = init_device_mesh("cpu", (world,))
for layer in sharded:
    fully_shard(layer, mesh=mesh)
fully_shard(sharded, mesh=mesh)


def owned(module):
    """Elements of the parameters this rank holds (its DTensor shards, or whole tensors)."""
    return sum(p.to_local().numel() if isinstance(p, DTensor) else p.numel() for p in module.parameters())


def pcie_bytes_per_step(owned_elements):
    return 2 * FP16_BYTES * owned_elements  # fp16 gradient shard to the CPU, fp16 parameter shard back


sharded_traffic = pcie_bytes_per_step(owned(sharded))
unsharded_traffic = pcie_bytes_per_step(owned(model))
model_traffic = 2 * FP16_BYTES * parameters / world  # 4 bytes per parameter, split over the ranks

# Recorded: torch's Adam on this CPU for the rank's shard (fp32 states), one step after a warm-up step.
shard = [torch.nn.Parameter(torch.randn(owned(sharded)))]
shard[0].grad = torch.randn_like(shard[0])
adam = torch.optim.Adam(shard, lr=1e-3)
adam.step()
start = time.perf_counter()
adam.step()
adam_seconds = time.perf_counter() - start

# The model: transfers hidden behind compute when 4 bytes/param / PCIe <= 6 FLOPs/param/token * tokens / GPU
# FLOP/s, per parameter owned; the parameter count cancels out, leaving tokens per GPU per step.
break_even_tokens_single_gpu = (2 * FP16_BYTES / PCIE_BYTES_PER_S) / (6 / GPU_FLOPS)
_claims.at_most(
    "offload_traffic_is_4_bytes_per_owned_parameter",
    measured=abs(sharded_traffic / model_traffic - 1),
    control=abs(unsharded_traffic / model_traffic - 1),
    tolerance=0.0,
    parameters=parameters,
    owned_per_rank=owned(sharded),
    pcie_bytes_per_step_sharded=sharded_traffic,
    pcie_bytes_per_step_unsharded=unsharded_traffic,
    cpu_adam_seconds_for_shard=adam_seconds,
    cpu_adam_parameters_per_second=owned(sharded) / adam_seconds,
    assumed_gpu_flops=GPU_FLOPS,
    assumed_pcie_bytes_per_second=PCIE_BYTES_PER_S,
    break_even_tokens_per_gpu_one_gpu=break_even_tokens_single_gpu,
    break_even_tokens_per_gpu_sharded_over_world=break_even_tokens_single_gpu / world,
)
