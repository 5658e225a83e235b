# GPU-ready (needs CUDA GPUs, the nvidia-ml-py package and a machine with 2 or more NUMA nodes;
# skipped on CPU): Accelerate's override_numa_affinity, the call behind --enable_cpu_affinity, binds
# each rank to the CPUs NVML lists as near its GPU, a strict subset of all CPUs on a multi-socket box.
# Control: the rank's affinity before the call (every CPU). The affinity is restored afterwards.
#
#   accelerate launch --multi_gpu --num_processes 2 snippets/performance/numa_affinity_cuda.py
import glob
import os

import accelerate.utils.environment
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
before = os.sched_getaffinity(0)
accelerate.utils.environment.override_numa_affinity(accelerator.local_process_index)
after = os.sched_getaffinity(0)
os.sched_setaffinity(0, before)
_claims.equal(
    "cpu_affinity_is_a_strict_subset_on_a_numa_machine",
    measured=int(after < before),
    control=int(before < before),
    expected=1,
    cpus_before=len(before),
    cpus_after=len(after),
    numa_nodes=len(glob.glob("/sys/devices/system/node/node[0-9]*")),
)
