# Why offloading wants pinned host memory: a device-to-host copy of a gradient-sized buffer
# (256 MiB of fp16) with non_blocking=True into PINNED host memory returns to Python before the copy is
# done, so the GPU can go on computing while the copy runs (what ZeRO-Offload and FSDP2's
# CPUOffloadPolicy(pin_memory=True) rely on); into PAGEABLE memory the same call waits for the copy.
# Negative control: the same copy into a pageable host tensor. Needs one CUDA GPU (skipped on CPU).
#
#   accelerate launch --num_processes 1 snippets/sharded-training/offload_pinned_copy_overlap_cuda.py
import time

import torch
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
assert accelerator.device.type == "cuda", "this proof needs a CUDA GPU"
ELEMENTS = 128 * 1024 * 1024  # 256 MiB of fp16, a gradient shard's order of magnitude
gradient = torch.randn(ELEMENTS, device=accelerator.device, dtype=torch.float16)


def copy_to_host(pinned):
    """Seconds the non_blocking copy call holds the Python thread, and seconds until the copy is done."""
    host = torch.empty(ELEMENTS, dtype=torch.float16, pin_memory=pinned)
    host.copy_(gradient, non_blocking=True)  # warm-up (allocator, first-touch of the pages)
    torch.cuda.synchronize()
    start = time.perf_counter()
    host.copy_(gradient, non_blocking=True)
    returned = time.perf_counter() - start
    torch.cuda.synchronize()
    done = time.perf_counter() - start
    return returned, done


pinned_returned, pinned_done = copy_to_host(pinned=True)
pageable_returned, pageable_done = copy_to_host(pinned=False)
_claims.at_most(
    "pinned_copy_returns_before_it_finishes",
    measured=pinned_returned / pinned_done,
    control=pageable_returned / pageable_done,
    tolerance=0.2,
    pinned_seconds=pinned_done,
    pageable_seconds=pageable_done,
    pinned_gb_per_s=ELEMENTS * 2 / pinned_done / 1e9,
    pageable_gb_per_s=ELEMENTS * 2 / pageable_done / 1e9,
    gpu=torch.cuda.get_device_name(),
)
