# GPU-ready (needs 2 CUDA GPUs; skipped on CPU): after Accelerator(), each rank's current CUDA device
# is its local GPU, so a tensor made with device="cuda" lands there, and rank 1 has no CUDA context on
# GPU 0 (its PID is absent from torch.cuda.list_gpu_processes(0), which reads NVML through the
# nvidia-ml-py package). The controls do what the bug does: a CUDA call on device 0 from every rank,
# after which rank 1's PID appears on GPU 0 too, as nvidia-smi shows it. The last claim is read per
# rank: rank 0 always uses GPU 0, so only rank 1's answer can change.
#
#   accelerate launch --multi_gpu --num_processes 2 snippets/launching/gpu0_contexts_cuda.py
import os

import torch
from accelerate import Accelerator

import _claims

accelerator = Accelerator()


def on_every_rank(value):
    return accelerator.gather(torch.tensor([value], device=accelerator.device)).tolist()


def on_gpu_0():
    """1 if this process holds a CUDA context on GPU 0 (NVML's process list), 0 if not, -1 if unknown."""
    listing = torch.cuda.list_gpu_processes(0)
    if "not found" in listing:  # pynvml missing: the claim then fails with this detail
        return -1
    return int(any(line.split()[1:2] == [str(os.getpid())] for line in listing.splitlines()))


bare_tensor_device = torch.empty(1, device="cuda").device.index
accelerator.wait_for_everyone()
rank1_on_gpu0_before = on_gpu_0() if accelerator.process_index == 1 else 0
with torch.cuda.device(0):  # what code run before set_device does: every rank touches GPU 0
    device_zero_tensor = torch.empty(1, device="cuda").device.index
torch.cuda.synchronize(0)
accelerator.wait_for_everyone()
rank1_on_gpu0_after = on_gpu_0() if accelerator.process_index == 1 else 0

_claims.equal(
    "bare_cuda_tensor_lands_on_the_local_gpu",
    measured=on_every_rank(bare_tensor_device),
    control=on_every_rank(device_zero_tensor),
    expected=list(range(accelerator.num_processes)),
    current_device_per_rank=on_every_rank(torch.cuda.current_device()),
)
_claims.equal(
    "rank1_has_no_context_on_gpu0",
    measured=on_every_rank(rank1_on_gpu0_before),
    control=on_every_rank(rank1_on_gpu0_after),
    expected=[0] * accelerator.num_processes,
    gpu0_processes=torch.cuda.list_gpu_processes(0),
)
