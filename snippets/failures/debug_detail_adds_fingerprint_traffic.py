# What TORCH_DISTRIBUTED_DEBUG=DETAIL costs: a process group created at that level is wrapped in a
# ProcessGroupWrapper that, before every collective, checks its fingerprint (op type, shapes, dtypes)
# against the other ranks on a helper gloo group. Counted on 2 gloo ranks: the bytes each rank's process
# writes to its sockets (/proc/self/io wchar) per 4-byte all_reduce on a group made at DETAIL, against a
# group made at the level the job started with (control: the same all_reduces on a plain group).
# The level is set with dist.set_debug_level for the new group only, and restored afterwards; a real job
# sets TORCH_DISTRIBUTED_DEBUG in the launch environment, which torch.distributed reads at import.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/failures/debug_detail_adds_fingerprint_traffic.py
import time

import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
CALLS = 20


def bytes_written():
    """Bytes this process has passed to write()/writev() so far (gloo's TCP pairs write with writev)."""
    with open("/proc/self/io") as counters:
        return next(int(line.split()[1]) for line in counters if line.startswith("wchar"))


def per_all_reduce(group):
    """Bytes written and seconds per 4-byte all_reduce on `group`, over CALLS calls."""
    dist.barrier()
    before, start = bytes_written(), time.perf_counter()
    for _ in range(CALLS):
        dist.all_reduce(torch.ones(1), group=group)
    seconds, written = time.perf_counter() - start, bytes_written() - before
    dist.barrier()
    return written / CALLS, seconds / CALLS


level_at_start = dist.get_debug_level()
plain = dist.new_group()
dist.set_debug_level(dist.DebugLevel.DETAIL)
try:
    checked = dist.new_group()  # wrapped at creation: the level is read when a group is made
finally:
    dist.set_debug_level(level_at_start)
other_plain = dist.new_group()

plain_bytes, plain_seconds = per_all_reduce(plain)
checked_bytes, checked_seconds = per_all_reduce(checked)
other_plain_bytes, _ = per_all_reduce(other_plain)
_claims.at_least(
    "detail_adds_fingerprint_traffic",
    measured=checked_bytes / plain_bytes,
    control=other_plain_bytes / plain_bytes,
    bound=3.0,
    bytes_per_all_reduce_plain=plain_bytes,
    bytes_per_all_reduce_detail=checked_bytes,
    microseconds_per_all_reduce_plain=round(plain_seconds * 1e6, 1),
    microseconds_per_all_reduce_detail=round(checked_seconds * 1e6, 1),
    debug_level_at_start=str(level_at_start),
)
