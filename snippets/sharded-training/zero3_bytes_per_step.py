# How many bytes ZeRO-3 (FSDP2 fully_shard, parameters resharded after forward) hands to its collectives
# per training step, against DDP, on 2 gloo ranks; then the network a node needs for that traffic to hide
# behind compute (a model fed with the measured bytes).
# Measured: the same 3-Linear MLP trains one step under DDP (its all-reduce bytes read from the buckets a
# comm hook receives) and under fully_shard per Linear (the all-gather outputs, reduce-scatter inputs and
# any all-reduce counted by wrapping the torch.distributed functions FSDP2 calls). A ring all-gather or
# reduce-scatter of S bytes sends (n-1)/n*S per rank, a ring all-reduce 2(n-1)/n*S: so the per-rank
# volume ratio is (all-gathered + reduce-scattered bytes) / (2 x all-reduced bytes), the paper's 3 Psi / 2 Psi.
# Negative control: the same FSDP2 units with reshard_after_forward=False (kept from forward to backward:
# no second all-gather).
# Model: per step a node sends about ONE GPU's ring volume across its NICs (a ring over all GPUs leaves
# and enters each node once per channel), so with F achieved FLOP/s per GPU and t tokens per GPU per step
# (6 P t FLOPs), the traffic hides behind compute when node bandwidth >= bytes_per_step / (6 P t / F).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/sharded-training/zero3_bytes_per_step.py
import contextlib
import copy
import inspect
from collections import Counter

import torch
import torch.distributed as dist
from accelerate import Accelerator
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

import _claims

# Collectives whose payload we count: for an all-gather its output (the gathered tensor), for a
# reduce-scatter its input (the full gradient), for an all-reduce its tensor.
GATHERS = {"all_gather_single": "output_tensor", "all_gather_into_tensor": "output_tensor"}
SCATTERS = {"reduce_scatter_single": "input", "reduce_scatter_tensor": "input"}
REDUCES = {"all_reduce": "tensor"}

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4)
)
parameter_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
x, y = torch.randn(8, 64), torch.randn(8, 4)


@contextlib.contextmanager
def count_payload(totals):
    originals = {name: getattr(dist, name) for name in (*GATHERS, *SCATTERS, *REDUCES)}

    def wrap(name, function, argument, kind):
        signature = inspect.signature(function)

        def counted(*args, **kwargs):
            tensor = signature.bind(*args, **kwargs).arguments[argument]  # FSDP2 passes them by keyword
            totals[kind] += tensor.numel() * tensor.element_size()
            totals[f"{kind}_calls"] += 1
            return function(*args, **kwargs)

        return counted

    for name, index in GATHERS.items():
        setattr(dist, name, wrap(name, originals[name], index, "all_gathered"))
    for name, index in SCATTERS.items():
        setattr(dist, name, wrap(name, originals[name], index, "reduce_scattered"))
    for name, index in REDUCES.items():
        setattr(dist, name, wrap(name, originals[name], index, "all_reduced"))
    try:
        yield totals
    finally:
        for name, function in originals.items():
            setattr(dist, name, function)


def one_step(net, totals):
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    with count_payload(totals):
        torch.nn.functional.mse_loss(net(x), y).backward()
        optimizer.step()


# DDP: the bytes of every bucket its reducer all-reduces (its C++ reducer bypasses dist.all_reduce)
ddp_totals = Counter()
ddp = DDP(copy.deepcopy(model))


def counting_hook(state, bucket):
    ddp_totals["all_reduced"] += bucket.buffer().numel() * bucket.buffer().element_size()
    return allreduce_hook(state, bucket)


ddp.register_comm_hook(state=None, hook=counting_hook)
ddp_python_calls = Counter()  # what DDP's step passes through torch.distributed's Python functions: recorded
one_step(ddp, ddp_python_calls)

mesh = init_device_mesh("cpu", (world,))


def sharded(reshard_after_forward):
    net = copy.deepcopy(model)
    for layer in net:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(net, mesh=mesh)
    totals = Counter()
    one_step(net, totals)
    return totals


zero3 = sharded(reshard_after_forward=True)  # ZeRO-3: gathered before forward and again before backward
kept = sharded(reshard_after_forward=False)  # control: gathered once, kept until backward


def ring_volume_per_rank(totals):
    """Bytes one rank sends in a ring: (n-1)/n of each all-gather/reduce-scatter payload, 2(n-1)/n of an all-reduce."""
    share = (world - 1) / world
    return share * (totals["all_gathered"] + totals["reduce_scattered"]) + 2 * share * totals["all_reduced"]


ddp_volume = ring_volume_per_rank(ddp_totals)
details = dict(
    parameter_bytes=parameter_bytes,
    zero3_payload=dict(zero3),
    kept_payload=dict(kept),
    ddp_payload=dict(ddp_totals),
    ddp_python_collectives=dict(ddp_python_calls),
    zero3_payload_per_parameter_byte=(zero3["all_gathered"] + zero3["reduce_scattered"]) / parameter_bytes,
    ddp_payload_per_parameter_byte=ddp_totals["all_reduced"] / parameter_bytes,
)
zero3_ratio = ring_volume_per_rank(zero3) / ddp_volume
_claims.between(
    "zero3_sends_one_and_a_half_ddp",
    measured=zero3_ratio,
    control=ring_volume_per_rank(kept) / ddp_volume,  # no backward re-gather: DDP's volume
    low=1.45,
    high=1.55,
    **details,
)

# --- The model: what a node's network must carry for the traffic to hide behind compute ----------------
# Inputs are assumptions, stated on the page: bf16 weights and gradients on the wire (2 bytes per parameter),
# 400 TFLOP/s achieved per GPU (about 40% of an H100/H200's dense bf16 peak), 8 nodes of 8 GPUs.
WIRE_BYTES_PER_PARAMETER, FLOPS_PER_GPU, GPUS = 2, 400e12, 64
volume_per_parameter_byte = zero3_ratio * 2 * (GPUS - 1) / GPUS  # ZeRO-3's ring volume, from the measured ratio


def break_even_node_bandwidth(parameters, tokens_per_gpu, volume_per_byte):
    """Bytes/s a node must move across nodes so that one step's traffic takes no longer than its compute."""
    step_bytes = volume_per_byte * WIRE_BYTES_PER_PARAMETER * parameters
    compute_seconds = 6 * parameters * tokens_per_gpu / FLOPS_PER_GPU
    return step_bytes / compute_seconds


ddp_volume_per_byte = 2 * (GPUS - 1) / GPUS
needed = break_even_node_bandwidth(65e9, 4096, volume_per_parameter_byte) / 1e9
_claims.between(
    "break_even_node_bandwidth",
    measured=needed,  # GB/s for 4,096 tokens per GPU per step; the same for any model size P
    control=break_even_node_bandwidth(65e9, 4096, ddp_volume_per_byte) / 1e9,  # DDP's volume, same model
    low=90.0,
    high=100.0,
    gb_per_s_at_16k_tokens=break_even_node_bandwidth(65e9, 16384, volume_per_parameter_byte) / 1e9,
    gb_per_s_7b_4096_tokens=break_even_node_bandwidth(7e9, 4096, volume_per_parameter_byte) / 1e9,
    ddp_gb_per_s=break_even_node_bandwidth(65e9, 4096, ddp_volume_per_byte) / 1e9,
)

# A 65B model on 10 GbE (1.25 GB/s per node), 4,096 tokens per GPU: how many times its compute does one
# step's traffic take? Control: the same step on 8 x 400 Gb/s NICs per node (400 GB/s).
step_gb = volume_per_parameter_byte * WIRE_BYTES_PER_PARAMETER * 65e9 / 1e9
compute_seconds = 6 * 65e9 * 4096 / FLOPS_PER_GPU
_claims.at_least(
    "ten_gbe_65b_comm_dwarfs_compute",
    measured=step_gb / 1.25 / compute_seconds,
    control=step_gb / 400 / compute_seconds,
    bound=60.0,
    step_gb_per_gpu_and_per_node=step_gb,
    compute_seconds_per_step=compute_seconds,
    comm_seconds_10gbe=step_gb / 1.25,
)
