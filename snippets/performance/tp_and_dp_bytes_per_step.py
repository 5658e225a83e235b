# Why tensor parallelism stays inside a node and data parallelism can cross nodes: what each sends per
# step, counted from the bytes each rank's process writes to its sockets (/proc/self/io wchar) on 2 gloo
# ranks, then turned into time on NVLink, PCIe and InfiniBand with the sourced link speeds (a model).
#  * TP: torch's ColwiseParallel + RowwiseParallel MLP, forward + backward with an input that needs its
#    gradient (as inside a network), sends two all-reduces of the activation (T tokens x H): one after
#    the row-parallel layer, one for the input's gradient. Control: the same MLP, not parallelized.
#  * DP: one DDP step of the same dense MLP sends one all-reduce of all its gradients (P parameters).
#    Control: the same step under no_sync().
#  * TP's bytes follow the tokens: doubling T doubles TP's bytes. Control: the same TP step at T tokens
#    again (ratio 1). DP's ratio under the same doubling is recorded beside it, not judged.
# Each all-reduce of S bytes costs 2(n-1)/n * S per rank (nccl-tests' bus factor; 1 at n = 2).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/performance/tp_and_dp_bytes_per_step.py
import copy

import torch
import torch.distributed as dist
from accelerate import Accelerator
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.nn.parallel import DistributedDataParallel

import _claims

accelerator = Accelerator()
world = accelerator.num_processes
bus_factor = 2 * (world - 1) / world
HIDDEN, TOKENS = 128, 128  # a 128-token micro-batch of width 128: 64 KiB of float32 activation


def bytes_written():
    """Bytes this process has passed to write()/writev() so far (gloo's TCP pairs write with writev)."""
    with open("/proc/self/io") as counters:
        return next(int(line.split()[1]) for line in counters if line.startswith("wchar"))


def bytes_of_one_step(model, tokens):
    inputs = torch.randn(tokens, HIDDEN, requires_grad=True)  # an activation from the layer below
    dist.barrier()
    before = bytes_written()
    model(inputs).sum().backward()
    sent = bytes_written() - before
    dist.barrier()
    return sent


torch.manual_seed(0)  # the same dense weights on every rank
dense = torch.nn.Sequential(torch.nn.Linear(HIDDEN, 4 * HIDDEN), torch.nn.GELU(), torch.nn.Linear(4 * HIDDEN, HIDDEN))
parameters = sum(p.numel() for p in dense.parameters())
mesh = init_device_mesh("cpu", (world,))
tensor_parallel = parallelize_module(copy.deepcopy(dense), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
data_parallel = DistributedDataParallel(copy.deepcopy(dense))
for model in (tensor_parallel, data_parallel):
    bytes_of_one_step(model, TOKENS)  # warm-up: DDP rebuilds its buckets after the first step

activation_bytes = TOKENS * HIDDEN * 4
tp_model = 2 * bus_factor * activation_bytes  # two activation all-reduces per MLP block
dp_model = bus_factor * parameters * 4  # one all-reduce of every fp32 gradient
tp_bytes = bytes_of_one_step(tensor_parallel, TOKENS)
tp_bytes_double = bytes_of_one_step(tensor_parallel, 2 * TOKENS)
tp_bytes_again = bytes_of_one_step(tensor_parallel, TOKENS)
dense_bytes = bytes_of_one_step(dense, TOKENS)
dp_bytes = bytes_of_one_step(data_parallel, TOKENS)
dp_bytes_double = bytes_of_one_step(data_parallel, 2 * TOKENS)
with data_parallel.no_sync():
    no_sync_bytes = bytes_of_one_step(data_parallel, TOKENS)


def seconds_per_step_on_links(shape):
    """The model, at a real transformer's size: communication seconds per micro-batch (TP) and per
    optimizer step (DP) on each link, from the per-rank bytes counted above for the same formulas and
    the links' unidirectional speeds (GB/s, sourced on the page)."""
    links = {"NVLink 4 (H100/H200)": 450, "PCIe 5 x16": 63, "InfiniBand, 8x400 Gb/s per 8-GPU node": 50}
    tp, dp_nodes, layers = shape["tp"], shape["dp_nodes"], shape["layers"]
    activation = shape["tokens"] * shape["hidden"] * 2  # bf16
    tp_per_micro_batch = layers * 4 * (2 * (tp - 1) / tp) * activation  # 2 blocks per layer, 2 all-reduces each
    dp_per_step = (2 * (dp_nodes - 1) / dp_nodes) * shape["parameters"] / tp * 2  # bf16 gradients of a TP shard
    return {
        "tp_bytes_per_micro_batch_GB": round(tp_per_micro_batch / 1e9, 2),
        "dp_bytes_per_step_GB": round(dp_per_step / 1e9, 2),
        "tp_seconds_per_micro_batch": {name: round(tp_per_micro_batch / (speed * 1e9), 4) for name, speed in links.items()},
        "dp_seconds_per_step": {name: round(dp_per_step / (speed * 1e9), 4) for name, speed in links.items()},
    }


REFERENCE = {"parameters": 70e9, "layers": 80, "hidden": 8192, "tokens": 4096, "tp": 8, "dp_nodes": 16}
_claims.between(
    "tp_block_sends_two_activation_all_reduces",
    measured=tp_bytes / tp_model,
    control=dense_bytes / tp_model,
    low=0.98,
    high=1.05,
    tp_bytes=tp_bytes,
    model_bytes=tp_model,
    activation_bytes=activation_bytes,
    reference_shape=REFERENCE,
    reference_model=seconds_per_step_on_links(REFERENCE),
)
_claims.between(
    "ddp_step_sends_one_gradient_all_reduce",
    measured=dp_bytes / dp_model,
    control=no_sync_bytes / dp_model,
    low=0.98,
    high=1.05,
    dp_bytes=dp_bytes,
    model_bytes=dp_model,
    parameters=parameters,
)
_claims.between(
    "tp_bytes_follow_tokens",
    measured=tp_bytes_double / tp_bytes if tp_bytes else float("nan"),  # nothing sent: nothing to scale
    control=tp_bytes_again / tp_bytes if tp_bytes else float("nan"),
    low=1.9,
    high=2.1,
    tp_bytes=tp_bytes,
    tp_bytes_double_tokens=tp_bytes_double,
    dp_ratio_when_tokens_double=dp_bytes_double / dp_bytes if dp_bytes else float("nan"),
)
