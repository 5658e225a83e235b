# Why a host timer around asynchronous work is wrong, shown on CPU. A call that only enqueues its work
# returns before the work is done, so time.perf_counter() stopped right after it measures the enqueueing.
# CUDA kernels behave so (the GPU proof beside this one); on CPU the same happens with a collective called
# with async_op=True: gloo runs it on a background thread and the call returns a Work handle at once.
# Timed correctly, the region ends after work.wait() (on a GPU: after torch.cuda.synchronize() or with
# CUDA events).
# Negative controls: the same timed region with the asynchrony removed (the plain blocking all_reduce), for
# which stopping the timer right after the call is right; the same timed region without wait().
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/performance/timing_async_work.py
#   (~1 s: 3 x 4 all-reduces of 16 MiB)
import time

import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

ELEMENTS = 4 * 2**20  # 16 MiB of float32 per all-reduce: tens of milliseconds on gloo
REPEATS = 4

accelerator = Accelerator()
tensors = [torch.ones(ELEMENTS) for _ in range(REPEATS)]


def timed(async_op, wait):
    """Seconds on rank's host clock for REPEATS all-reduces; the timer stops after the calls, or after wait()."""
    dist.barrier()  # both ranks start together
    started = time.perf_counter()
    works = [dist.all_reduce(tensor, async_op=async_op) for tensor in tensors]
    if wait:
        for work in works:
            work.wait()
    elapsed = time.perf_counter() - started
    for work in works:  # whatever was timed, the work is finished before the next region starts
        if work is not None:
            work.wait()
    return elapsed


timed(async_op=False, wait=False)  # warm: gloo's buffers and pairs are set up
blocking = timed(async_op=False, wait=False)  # no asynchrony: a timer right after the calls is right
async_unwaited = timed(async_op=True, wait=False)  # the mistake: the timer stops at the enqueue
async_waited = timed(async_op=True, wait=True)  # the fix: the timer stops after wait()

_claims.at_most(
    "timer_without_wait_misses_the_work",
    measured=async_unwaited / async_waited,
    control=blocking / async_waited,  # the same timer with the asynchrony removed
    tolerance=0.2,
    async_unwaited_ms=async_unwaited * 1e3,
    async_waited_ms=async_waited * 1e3,
    blocking_ms=blocking * 1e3,
    megabytes_per_all_reduce=ELEMENTS * 4 / 2**20,
    repeats=REPEATS,
)
_claims.at_least(
    "timer_after_wait_includes_the_work",
    measured=async_waited / blocking,
    control=async_unwaited / blocking,  # the same region without wait()
    bound=0.5,
)
