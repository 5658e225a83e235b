# How do you read an all-reduce benchmark? nccl-tests reports two bandwidths: algorithm bandwidth
# algbw = S / t, and bus bandwidth busbw = algbw * 2(n-1)/n, which is what each rank's link really
# carried and so can be compared with the hardware's peak. Two parts, on gloo over loopback:
#  * bytes: the bytes each rank's process writes to its sockets (/proc/self/io wchar) during one
#    dist.all_reduce of S bytes, divided by S, against the bus factor 2(n-1)/n. Control: the same
#    count for an all-gather with the same S-byte output (the reduction half removed), (n-1)/n.
#  * sizes: busbw at 4 KiB against busbw at 4 MiB (fastest of timed repeats): small messages are
#    latency-bound, so their busbw says nothing about the link. Control: a second 4 MiB measurement.
#    The fastest repeat, not the median: on a machine shared with other jobs the noise only ever adds
#    time, and a median of 15 moved by 4x between two 4 MiB measurements of one run.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/performance/allreduce_bus_bandwidth.py
import time

import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
world = accelerator.num_processes
bus_factor = 2 * (world - 1) / world  # nccl-tests' all-reduce correction (doc/PERFORMANCE.md)


def bytes_written():
    """Bytes this process has passed to write()/writev() so far (gloo's TCP pairs write with writev)."""
    with open("/proc/self/io") as counters:
        return next(int(line.split()[1]) for line in counters if line.startswith("wchar"))


def bytes_sent_per_byte(collective, size):
    dist.barrier()
    before = bytes_written()
    collective(size)
    after = bytes_written()
    dist.barrier()
    return (after - before) / size


def all_reduce(size):
    dist.all_reduce(torch.ones(size // 4))


def all_gather(size):  # the same S-byte result on every rank, assembled without any reduction
    dist.all_gather_single(torch.empty(size // 4), torch.ones(size // 4 // world))


S = 4 * 2**20
all_reduce_traffic = bytes_sent_per_byte(all_reduce, S)
all_gather_traffic = bytes_sent_per_byte(all_gather, S)
_claims.between(
    "allreduce_traffic_is_the_bus_factor",
    measured=all_reduce_traffic / bus_factor,
    control=all_gather_traffic / bus_factor,
    low=0.98,
    high=1.05,
    bytes_sent_over_size_all_reduce=round(all_reduce_traffic, 5),
    bytes_sent_over_size_all_gather=round(all_gather_traffic, 5),
    bus_factor=bus_factor,
    size_bytes=S,
    world=world,
)


def bus_bandwidth(size, repeats):
    """busbw = algbw * 2(n-1)/n from the fastest of `repeats` all-reduces of `size` bytes (GB/s)."""
    tensor = torch.ones(size // 4)
    dist.all_reduce(tensor)  # warm-up: connection buffers of this size
    times = []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(tensor)
        times.append(time.perf_counter() - start)
    # every rank uses the slowest rank's time, as nccl-tests does, so both ranks judge the same number
    elapsed = torch.tensor(min(times))
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    algbw = size / elapsed.item() / 1e9
    return algbw * bus_factor, algbw, elapsed.item()


small_busbw, small_algbw, small_time = bus_bandwidth(4 * 2**10, repeats=50)
large_busbw, large_algbw, large_time = bus_bandwidth(S, repeats=15)
large_again_busbw, _, _ = bus_bandwidth(S, repeats=15)
_claims.at_most(
    "small_messages_are_latency_bound",
    measured=small_busbw / large_busbw,
    control=large_again_busbw / large_busbw,
    tolerance=0.25,
    busbw_4KiB_GBps=round(small_busbw, 4),
    algbw_4KiB_GBps=round(small_algbw, 4),
    time_4KiB_us=round(small_time * 1e6, 1),
    busbw_4MiB_GBps=round(large_busbw, 3),
    algbw_4MiB_GBps=round(large_algbw, 3),
    time_4MiB_ms=round(large_time * 1e3, 2),
    busbw_4MiB_again_GBps=round(large_again_busbw, 3),
)
