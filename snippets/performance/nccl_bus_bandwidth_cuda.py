# GPU-ready (needs 2 CUDA GPUs and NCCL; skipped on CPU): the all-reduce benchmark nccl-tests runs,
# done from torch. busbw = algbw * 2(n-1)/n, from CUDA-event timings of dist.all_reduce on
# float32 tensors, median of repeats, the slowest rank's time. A healthy intra-node link (NVLink, or
# PCIe 4 and later) carries at least 10 GB/s at 256 MiB; 32 KiB messages are latency-bound and reach
# a small fraction of that. Controls: the 32 KiB busbw for the first claim, a second 256 MiB
# measurement for the second.
#
#   accelerate launch --multi_gpu --num_processes 2 snippets/performance/nccl_bus_bandwidth_cuda.py
#   (add NCCL_DEBUG=INFO to see the NCCL version, the transports and the rings it chose)
import statistics

import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
world = accelerator.num_processes
bus_factor = 2 * (world - 1) / world


def bus_bandwidth(size, repeats):
    tensor = torch.ones(size // 4, device=accelerator.device)
    for _ in range(5):  # warm-up: NCCL connects lazily and tunes on the first calls
        dist.all_reduce(tensor)
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        dist.barrier()
        torch.cuda.synchronize()
        start.record()
        dist.all_reduce(tensor)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    elapsed = torch.tensor(statistics.median(times), device=accelerator.device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    algbw = size / elapsed.item() / 1e9
    return algbw * bus_factor, algbw


small_busbw, small_algbw = bus_bandwidth(32 * 2**10, repeats=50)
large_busbw, large_algbw = bus_bandwidth(256 * 2**20, repeats=20)
large_again_busbw, _ = bus_bandwidth(256 * 2**20, repeats=20)
versions = dict(
    nccl=".".join(map(str, torch.cuda.nccl.version())),
    device=torch.cuda.get_device_name(accelerator.device),
    backend=dist.get_backend(),
)
_claims.at_least(
    "nccl_busbw_at_256_mib_reaches_10_gbps",
    measured=large_busbw,
    control=small_busbw,
    bound=10.0,
    algbw_256MiB_GBps=round(large_algbw, 2),
    busbw_32KiB_GBps=round(small_busbw, 3),
    **versions,
)
_claims.at_most(
    "nccl_small_messages_are_latency_bound",
    measured=small_busbw / large_busbw,
    control=large_again_busbw / large_busbw,
    tolerance=0.2,
    busbw_256MiB_again_GBps=round(large_again_busbw, 2),
)
