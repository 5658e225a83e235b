# What the NCCL watchdog does with a collective that never finishes. ProcessGroupNCCL's watchdog thread
# polls every outstanding collective; one still running after the group's timeout is reported ("Watchdog
# caught collective operation timeout") and, with TORCH_NCCL_ASYNC_ERROR_HANDLING left unset (3,
# SkipCleanUp), the process is torn down (std::abort, SIGABRT) instead of hanging forever.
# A hang on one GPU: a child process with a 1-rank NCCL group and a 10-s timeout puts a 30-s
# torch.cuda._sleep kernel on its stream, then an all_reduce; the NCCL stream waits for the sleep, so the
# all_reduce cannot finish within the timeout, and the main thread blocks in synchronize().
# After a timeout, the watchdog in the PyTorch source read for this proof (ProcessGroupNCCL.cpp, Watchdog
# loop: "Give time for dumping before throwing exception for all ranks") sleeps 4 x
# TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC (15 s unless set: 60 s) before tearing the process down; with that
# wait the 30-s sleep would end first and the hang would not be one. So the child sets the wait to 1 s
# (a 4-s pause); every other TORCH_NCCL_* variable is left unset.
# The sleep kernel's length is calibrated with CUDA events, not from clock_rate (which CUDA 13 dropped
# from cudaDeviceProp).
# Negative control: the same child with a 2-s sleep, shorter than the timeout: it finishes and exits 0.
#
#   accelerate launch --num_processes 1 snippets/failures/nccl_watchdog_aborts_hung_collective_cuda.py   (one CUDA GPU)
# NCCL needs CUDA tensors, so there is nothing to run on a CPU: this proof needs a GPU.
import os
import signal
import subprocess
import sys
import textwrap
import time

import torch

import _claims

TIMEOUT_S = 10
DUMP_WAIT_MS = 1000  # the watchdog pauses 4x this after a timeout, for a flight-recorder dump
CHILD = textwrap.dedent(
    """
    import datetime, sys, torch, torch.distributed as dist
    sleep_s = float(sys.argv[1])
    torch.cuda.set_device(0)
    store = dist.HashStore()
    dist.init_process_group("nccl", store=store, rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=%d), device_id=torch.device("cuda", 0))
    tensor = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(tensor)  # warm: the communicator is built
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record(); torch.cuda._sleep(10**8); end.record(); torch.cuda.synchronize()
    cycles = int(sleep_s * 10**8 / (begin.elapsed_time(end) / 1000))  # _sleep's cycles per second, measured
    import time
    print("issued", time.time(), flush=True)
    torch.cuda._sleep(cycles)  # a kernel that spins: the all_reduce behind it cannot start
    dist.all_reduce(tensor)
    torch.cuda.synchronize()
    print("finished", flush=True)
    dist.destroy_process_group()
    """
    % TIMEOUT_S
)

assert torch.cuda.is_available(), "this proof needs a CUDA device"


def run_child(sleep_s):
    """Run the 1-rank NCCL child; how it ended, seconds from the all_reduce call to its end, the watchdog's words."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("TORCH_NCCL_")}
    environment["TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC"] = str(DUMP_WAIT_MS)  # keep the pre-teardown pause short
    for variable in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        environment.pop(variable, None)  # the child builds its own 1-rank group
    child = subprocess.run([sys.executable, "-c", CHILD, str(sleep_s)], env=environment, capture_output=True,
                           text=True, timeout=120)  # fmt: skip
    ended = time.time()
    issued = [float(line.split()[1]) for line in child.stdout.splitlines() if line.startswith("issued ")]
    elapsed = ended - issued[0] if issued else None  # from the hung all_reduce's call to the child's end
    if child.returncode == -signal.SIGABRT and "Watchdog caught collective operation timeout" in child.stderr:
        outcome = "aborted by the watchdog"
    elif child.returncode == 0 and "finished" in child.stdout:
        outcome = "finished"
    else:
        outcome = f"exit {child.returncode}"
    watchdog_lines = [line for line in child.stderr.splitlines() if "Watchdog" in line or "timeout" in line.lower()]
    return outcome, elapsed, watchdog_lines[:3]


hung, hung_s, hung_lines = run_child(sleep_s=3 * TIMEOUT_S)
quick, quick_s, _ = run_child(sleep_s=2)
_claims.equal(
    "nccl_watchdog_aborts_hung_all_reduce",
    measured=hung,
    control=quick,
    expected="aborted by the watchdog",
    timeout_s=TIMEOUT_S,
    dump_wait_ms=DUMP_WAIT_MS,
    watchdog_lines=hung_lines,
)
_claims.between(
    "nccl_watchdog_fires_after_the_timeout",
    measured=hung_s,
    control=quick_s,
    low=TIMEOUT_S,
    high=3 * TIMEOUT_S - 2,  # before the 30-s sleep would have let the all_reduce finish
)
