# Why nvidia-smi shows more than torch.cuda.memory_allocated(): PyTorch's CUDA caching allocator keeps the
# memory of a freed tensor (it stays "reserved", and the driver still counts it as used) so the next
# allocation of that size needs no cudaMalloc; torch.cuda.empty_cache() hands the unused cached blocks back
# to the driver, and never the memory of a live tensor.
# The driver's view is torch.cuda.mem_get_info() (cudaMemGetInfo: what nvidia-smi reports as used, for
# this process and every other one on the GPU); the allocator's view is memory_allocated/memory_reserved.
# Negative controls: the same program with the cache handed back (empty_cache() after the del) for the
# first two claims; the same program without empty_cache() for the third; for the fourth, the same
# empty_cache() after the tensor was deleted.
#
#   accelerate launch --num_processes 1 snippets/memory/caching_allocator_cuda.py   (one CUDA GPU)
# A CPU has no caching allocator to look at (torch's CPU tensors come from malloc): this proof needs a GPU.
import torch
from accelerate import Accelerator

import _claims

MIB = 2**20
SIZE = 512 * MIB  # far above the 2 MiB "large block" size and above any cache left by the launch

accelerator = Accelerator()
device = accelerator.device
assert device.type == "cuda", "this proof needs a CUDA device"
torch.cuda.synchronize()
torch.cuda.empty_cache()  # start from an allocator holding nothing unused


def driver_used():
    """Bytes the driver counts as used on this GPU (cudaMemGetInfo), the number nvidia-smi shows."""
    free, total = torch.cuda.mem_get_info(device)
    return total - free


def after_free(hand_back):
    """Allocate SIZE bytes, delete the tensor, optionally empty the cache: the allocator's and driver's view."""
    base_allocated, base_reserved, base_used = torch.cuda.memory_allocated(), torch.cuda.memory_reserved(), driver_used()
    block = torch.empty(SIZE, dtype=torch.uint8, device=device)
    block.fill_(1)
    torch.cuda.synchronize()
    allocated_while_alive = torch.cuda.memory_allocated() - base_allocated
    del block  # the tensor is gone; its block goes back to the allocator's cache, not to the driver
    if hand_back:
        torch.cuda.empty_cache()
    torch.cuda.synchronize()
    return {
        "allocated_while_alive_mib": allocated_while_alive / MIB,
        "allocated_after_del_mib": (torch.cuda.memory_allocated() - base_allocated) / MIB,
        "reserved_after_del_mib": (torch.cuda.memory_reserved() - base_reserved) / MIB,
        "driver_used_after_del_mib": (driver_used() - base_used) / MIB,
    }


cached = after_free(hand_back=False)
handed_back = after_free(hand_back=True)
torch.cuda.empty_cache()

_claims.at_least(
    "freed_tensor_stays_reserved",
    measured=cached["reserved_after_del_mib"] - cached["allocated_after_del_mib"],  # reserved but unallocated
    control=handed_back["reserved_after_del_mib"] - handed_back["allocated_after_del_mib"],
    bound=0.9 * SIZE / MIB,
    cached=cached,
    handed_back=handed_back,
)

_claims.at_least(
    "driver_still_counts_cached_memory",
    measured=cached["driver_used_after_del_mib"],
    control=handed_back["driver_used_after_del_mib"],
    bound=0.9 * SIZE / MIB,
)

# empty_cache() returns what the cache holds: the driver's free memory grows by the freed block.
block = torch.empty(SIZE, dtype=torch.uint8, device=device)
block.fill_(1)
del block
torch.cuda.synchronize()
before = driver_used()
torch.cuda.empty_cache()
torch.cuda.synchronize()
returned_by_empty_cache = (before - driver_used()) / MIB
block = torch.empty(SIZE, dtype=torch.uint8, device=device)
block.fill_(1)
del block
torch.cuda.synchronize()
before = driver_used()
torch.cuda.synchronize()  # the same program, empty_cache() left out
returned_without = (before - driver_used()) / MIB
torch.cuda.empty_cache()
_claims.at_least(
    "empty_cache_returns_cached_memory",
    measured=returned_by_empty_cache,
    control=returned_without,
    bound=0.9 * SIZE / MIB,
)

# empty_cache() never frees a live tensor: with the tensor still alive it returns (almost) nothing.
live = torch.empty(SIZE, dtype=torch.uint8, device=device)
live.fill_(1)
torch.cuda.synchronize()
before = driver_used()
torch.cuda.empty_cache()
torch.cuda.synchronize()
returned_while_alive = (before - driver_used()) / MIB
del live
torch.cuda.synchronize()
before = driver_used()
torch.cuda.empty_cache()
torch.cuda.synchronize()
returned_after_del = (before - driver_used()) / MIB
_claims.at_most(
    "empty_cache_keeps_live_tensors",
    measured=returned_while_alive,
    control=returned_after_del,  # the same call once the tensor was deleted
    tolerance=0.1 * SIZE / MIB,
)
