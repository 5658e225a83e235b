# async_op=True: the collective call returns a Work handle at once, and the output tensor holds the
# result only after work.wait(). Here the last rank joins the all-reduce 0.3 s late, so rank 0 can
# see both facts. Negative controls: the same all_reduce without async_op (the call blocks until the
# late rank arrives), and the tensor read before wait().
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/collectives/async_collective_wait.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import time

import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

DELAY_S = 0.3
accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
expected = float(sum(r + 1 for r in range(world)))  # the sum, built without any collective


def all_reduce_with_late_peer(async_op):
    dist.barrier()
    if rank == world - 1:
        time.sleep(DELAY_S)
    value = torch.tensor([float(rank + 1)], device=accelerator.device)
    started = time.perf_counter()
    work = dist.all_reduce(value, async_op=async_op)
    call_seconds = time.perf_counter() - started
    before_wait = value.clone()  # rank 0 copies the buffer while the late rank has not joined yet
    if async_op:
        work.wait()
    return call_seconds, before_wait.item(), value.item()


async_call, before_wait, after_wait = all_reduce_with_late_peer(async_op=True)
blocking_call, _, _ = all_reduce_with_late_peer(async_op=False)
if rank == 0:  # the late rank itself finds the others already waiting: only rank 0 sees the gap
    _claims.at_most(
        "async_call_returns_before_the_collective_completes",
        measured=async_call / DELAY_S,
        control=blocking_call / DELAY_S,
        tolerance=0.3,
        async_call_seconds=async_call,
        blocking_call_seconds=blocking_call,
    )
    _claims.equal(
        "result_is_there_after_wait",
        measured=abs(after_wait - expected),
        control=abs(before_wait - expected),
        expected=0.0,
        value_before_wait=before_wait,
        value_after_wait=after_wait,
    )
dist.barrier()
