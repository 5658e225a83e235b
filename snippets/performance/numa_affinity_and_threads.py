# CPU threads and CPU affinity per rank: what `accelerate launch` sets, and what --enable_cpu_affinity
# does. Three parts, all Accelerate's own code:
#  * threads: the environment accelerate's launcher builds for its workers (_validate_launch_command,
#    then prepare_multi_gpu_env) from `--multi_gpu --num_processes 2 x.py`, with OMP_NUM_THREADS
#    removed from the environment: OMP_NUM_THREADS=1. Control: the same with
#    --num_cpu_threads_per_process 2.
#  * the flag: --enable_cpu_affinity only puts ACCELERATE_CPU_AFFINITY=1 in the workers' environment.
#    Control: the same command without it.
#  * the binding: PartialState then calls set_numa_affinity(local rank), which asks NVML which CPUs
#    are near the rank's GPU and binds the process to them. No GPU here, so override_numa_affinity
#    runs against a stand-in NVML in which GPU r is attached to CPU core r; the call really sets this
#    rank's affinity (restored afterwards). Control: the same call with CUDA unavailable, as on a CPU
#    machine, where Accelerate binds nothing.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/performance/numa_affinity_and_threads.py
import contextlib
import os
import sys
import types

import accelerate.utils
import accelerate.utils.environment
import accelerate.utils.launch
import torch
from accelerate import Accelerator
from accelerate.commands.launch import _validate_launch_command, launch_command_parser

import _claims

accelerator = Accelerator()


@contextlib.contextmanager
def environment_without(name):
    saved = os.environ.pop(name, None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ[name] = saved


def worker_environment(*flags):
    """The environment accelerate launch would give its workers for this command line."""
    args = launch_command_parser().parse_args(["--multi_gpu", "--num_processes", "2", *flags, "x.py"])
    with environment_without("OMP_NUM_THREADS"):
        args, _, _ = _validate_launch_command(args)
        return accelerate.utils.launch.prepare_multi_gpu_env(args)


default_env = worker_environment()
_claims.equal(
    "launcher_sets_omp_num_threads_when_unset",
    measured=default_env.get("OMP_NUM_THREADS", "unset"),
    control=worker_environment("--num_cpu_threads_per_process", "2").get("OMP_NUM_THREADS", "unset"),
    expected="1",
    this_rank_omp_num_threads=os.environ.get("OMP_NUM_THREADS"),
    this_rank_torch_threads=torch.get_num_threads(),
)
_claims.equal(
    "enable_cpu_affinity_is_an_environment_flag",
    measured=worker_environment("--enable_cpu_affinity").get("ACCELERATE_CPU_AFFINITY", "unset"),
    control=default_env.get("ACCELERATE_CPU_AFFINITY", "unset"),
    expected="1",
)


@contextlib.contextmanager
def stand_in_nvml(cuda_available):
    """A machine whose GPU r is attached to CPU core r (modulo the cores there are), as NVML would say."""
    nvml = types.ModuleType("pynvml")
    nvml.nvmlInit = lambda: None
    nvml.nvmlDeviceGetHandleByIndex = lambda index: index
    nvml.nvmlDeviceGetCpuAffinity = lambda handle, words: [1 << (handle % os.cpu_count())] + [0] * (words - 1)
    saved = sys.modules.get("pynvml"), torch.cuda.is_available, accelerate.utils.is_pynvml_available
    sys.modules["pynvml"], torch.cuda.is_available = nvml, (lambda: cuda_available)
    accelerate.utils.is_pynvml_available = lambda: True
    try:
        yield
    finally:
        if saved[0] is None:
            sys.modules.pop("pynvml")
        else:
            sys.modules["pynvml"] = saved[0]
        torch.cuda.is_available, accelerate.utils.is_pynvml_available = saved[1], saved[2]


def affinity_after_binding(cuda_available):
    before = os.sched_getaffinity(0)
    try:
        with stand_in_nvml(cuda_available):
            accelerate.utils.environment.override_numa_affinity(accelerator.local_process_index)
        return sorted(os.sched_getaffinity(0))
    finally:
        os.sched_setaffinity(0, before)


def on_every_rank(cores):
    return [sorted(found) for found in accelerate.utils.gather_object([cores])]


_claims.equal(
    "cpu_affinity_binds_each_rank_near_its_gpu",
    measured=on_every_rank(affinity_after_binding(cuda_available=True)),
    control=on_every_rank(affinity_after_binding(cuda_available=False)),
    expected=[[rank % os.cpu_count()] for rank in range(accelerator.num_processes)],
    cores_before=sorted(os.sched_getaffinity(0)),
)
