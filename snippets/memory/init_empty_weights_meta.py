# Building a model too big for memory: inside accelerate's init_empty_weights() the parameters are
# created on the meta device, with shapes and dtypes but no storage, so a 16.8M-parameter model costs
# almost no RAM. Negative control: the same constructor without the context manager.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/memory/init_empty_weights_meta.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import ctypes
import gc

import psutil
import torch
from accelerate import Accelerator, init_empty_weights

import _claims

accelerator = Accelerator()
WIDTH, LAYERS = 4096, 1  # 4096 x 4096 + 4096 = 16.8M parameters, 64 MiB in float32


def build():
    return torch.nn.Sequential(*(torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)))


def resident_growth(make):
    """MB of this process's resident memory that building the model adds, and the model."""
    # Free what earlier code left behind and hand the freed heap pages back to the OS (glibc's malloc_trim):
    # otherwise the build can reuse pages that are already resident and not show in RSS. Without it, run in
    # the harness's worker after one_copy_rank0_broadcast.py, a build with real weights grew RSS by 0.0 MiB.
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    before = psutil.Process().memory_info().rss
    model = make()
    return (psutil.Process().memory_info().rss - before) / 2**20, model


def build_empty():
    with init_empty_weights():
        return build()


empty_mb, empty = resident_growth(build_empty)
parameters = sum(p.numel() for p in empty.parameters())
on_meta = sum(p.numel() for p in empty.parameters() if p.is_meta)
del empty
full_mb, full = resident_growth(build)
full_on_meta = sum(p.numel() for p in full.parameters() if p.is_meta)
del full

_claims.at_most(
    "empty_weights_cost_no_memory",
    measured=empty_mb,
    control=full_mb,
    tolerance=8.0,  # MiB: allocator noise; the real weights are 64 MiB
    parameters=parameters,
    float32_megabytes=parameters * 4 / 2**20,
)
_claims.equal(
    "every_parameter_is_on_meta",
    measured=on_meta / parameters,
    control=full_on_meta / parameters,
    expected=1.0,
)
