# Timing GPU work: a host timer stopped right after the calls measures the kernel launches, not the
# kernels. CUDA work is queued on a stream and runs later; time.perf_counter() is right only after
# torch.cuda.synchronize() (the host waits for the queue to drain), and CUDA events time the stream itself.
# Ten 8192 x 8192 float32 matmuls (about 11 TFLOP in all) on one GPU, timed three ways.
# Negative controls: the same region with the synchronize before the timer stops (for the first claim);
# the unsynchronised timer (for the second).
#
#   accelerate launch --num_processes 1 snippets/performance/timing_gpu_matmul_cuda.py   (one CUDA GPU)
# Nothing here is asynchronous on a CPU: this proof needs a GPU.
import time

import torch
from accelerate import Accelerator

import _claims

SIZE = 8192
REPEATS = 10

accelerator = Accelerator()
device = accelerator.device
assert device.type == "cuda", "this proof needs a CUDA device"
a = torch.randn(SIZE, SIZE, device=device)
b = torch.randn(SIZE, SIZE, device=device)
for _ in range(3):
    a @ b  # warm: cuBLAS handles and workspaces are created
torch.cuda.synchronize()


def host_timer(synchronize):
    """Seconds on the host clock around REPEATS matmuls, with or without a synchronize before stopping."""
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(REPEATS):
        a @ b
    if synchronize:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - started
    torch.cuda.synchronize()  # the queue is empty before the next measurement, whatever was timed
    return elapsed


def event_timer():
    """Seconds between two CUDA events recorded on the stream around REPEATS matmuls."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(REPEATS):
        a @ b
    end.record()
    end.synchronize()  # wait for this event only (the docs' example calls torch.cuda.synchronize())
    return start.elapsed_time(end) / 1e3


unsynchronised = host_timer(synchronize=False)
synchronised = host_timer(synchronize=True)
events = event_timer()

_claims.at_most(
    "unsynchronised_timer_misses_gpu_work",
    measured=unsynchronised / events,
    control=synchronised / events,  # the same region with the synchronize
    tolerance=0.3,
    unsynchronised_ms=unsynchronised * 1e3,
    synchronised_ms=synchronised * 1e3,
    events_ms=events * 1e3,
    tflops_by_events=2 * SIZE**3 * REPEATS / events / 1e12,
    gpu=torch.cuda.get_device_name(device),
)
_claims.at_most(
    "cuda_events_agree_with_synchronised_timer",
    measured=abs(events - synchronised) / synchronised,
    control=abs(unsynchronised - synchronised) / synchronised,  # the timer without synchronize
    tolerance=0.1,
)
