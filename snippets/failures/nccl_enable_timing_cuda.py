# What TORCH_NCCL_ENABLE_TIMING=1 gives: ProcessGroupNCCL records a CUDA start event for every
# collective as well as the end event it always records, so a finished Work can report its duration
# (Work._get_duration(), milliseconds). The variable is read when a NCCL process group is constructed,
# so the proof sets it, creates a new group, unsets it, and creates another (the control): an all_reduce
# on the first reports a positive duration; on the second _get_duration() refuses (timing not enabled).
#
#   accelerate launch --num_processes 1 snippets/failures/nccl_enable_timing_cuda.py   (one CUDA GPU is enough; NCCL)
# NCCL needs CUDA tensors, so there is nothing to run on a CPU: this proof needs a GPU.
import os

import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
assert dist.get_backend() == "nccl", "this proof needs the NCCL backend"


def duration_ms(group):
    """The all_reduce's duration from its Work, or -1.0 when the group refuses to time it."""
    tensor = torch.ones(2**20, device=accelerator.device)
    work = dist.all_reduce(tensor, group=group, async_op=True)
    work.wait()
    torch.cuda.synchronize()
    try:
        return float(work._get_duration()), "reported"
    except RuntimeError as error:
        return -1.0, str(error).splitlines()[0][:200]


previous = os.environ.get("TORCH_NCCL_ENABLE_TIMING")
os.environ["TORCH_NCCL_ENABLE_TIMING"] = "1"
try:
    timed = dist.new_group(backend="nccl")
    dist.barrier(group=timed)  # NCCL creates its communicator lazily: construct it while the variable is set
finally:
    if previous is None:
        del os.environ["TORCH_NCCL_ENABLE_TIMING"]
    else:
        os.environ["TORCH_NCCL_ENABLE_TIMING"] = previous
untimed = dist.new_group(backend="nccl")
dist.barrier(group=untimed)

timed_ms, timed_note = duration_ms(timed)
untimed_ms, untimed_note = duration_ms(untimed)
_claims.at_least(
    "enable_timing_reports_collective_duration",
    measured=timed_ms,
    control=untimed_ms,
    bound=1e-6,
    timed_note=timed_note,
    untimed_note=untimed_note,
    world_size=dist.get_world_size(),
    device=torch.cuda.get_device_name(),
    nccl_version=".".join(map(str, torch.cuda.nccl.version())),
)
