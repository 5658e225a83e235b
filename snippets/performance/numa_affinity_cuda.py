# GPU-ready (needs CUDA GPUs, the nvidia-ml-py package and a machine with 2 or more NUMA nodes;
# skipped on CPU): Accelerate's override_numa_affinity, the call behind --enable_cpu_affinity, binds
# each rank to the CPUs NVML lists as near its GPU, a strict subset of all CPUs on a multi-socket box.
# Control: the same call with CUDA reported unavailable, where the library binds nothing and the rank
# keeps every CPU. The affinity is restored after each call.
#
#   accelerate launch --multi_gpu --num_processes 2 snippets/performance/numa_affinity_cuda.py
import glob
import os

import accelerate.utils.environment
import torch
from accelerate import Accelerator

import _claims

accelerator = Accelerator()


def binding_narrows_affinity(cuda_available=True):
    """1 if override_numa_affinity leaves this rank on a strict subset of the CPUs it had before, else 0;
    the rank's affinity is restored afterwards. With cuda_available=False the library skips its NVML branch."""
    before = os.sched_getaffinity(0)
    saved = torch.cuda.is_available
    if not cuda_available:
        torch.cuda.is_available = lambda: False
    try:
        accelerate.utils.environment.override_numa_affinity(accelerator.local_process_index)
        after = os.sched_getaffinity(0)
        return int(after < before), len(before), len(after)
    finally:
        torch.cuda.is_available = saved
        os.sched_setaffinity(0, before)


narrowed, cpus_before, cpus_after = binding_narrows_affinity()
_claims.equal(
    "cpu_affinity_is_a_strict_subset_on_a_numa_machine",
    measured=narrowed,
    control=binding_narrows_affinity(cuda_available=False)[0],
    expected=1,
    cpus_before=cpus_before,
    cpus_after=cpus_after,
    numa_nodes=len(glob.glob("/sys/devices/system/node/node[0-9]*")),
)
