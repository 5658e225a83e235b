# What FSDP1's rate limiter (limit_all_gathers=True, the default) bounds: when the GPU is slower than the
# CPU thread that issues kernels, the CPU runs ahead through the units' pre-forward hooks and, without the
# limiter, issues every unit's all-gather at once, so the unsharded parameters of all of them are allocated
# together. With it, before a new all-gather the CPU waits on the free event of the unit two back
# (_FreeEventQueue keeps at most 2 in flight). Eight FSDP units of Linear(4096, 4096); each unit's forward
# also spins the GPU for a few ms (torch.cuda._sleep) so the GPU is the slow side. We read the peak ACTIVE
# memory during one forward, beyond what was active before it, in units of one unit's unsharded parameters.
# Not the allocated bytes: FSDP1 frees a unit's unsharded parameter on the CPU thread right after issuing
# its forward (record_stream, then free), and the caching allocator lowers allocated_bytes at that free
# although the block stays "active_awaiting_free" until the stream's work ends and cannot be reused; so a
# CPU that runs ahead makes the allocator take new memory that only the active count shows. Negative control: the same program with limit_all_gathers=False.
# Needs 2 CUDA GPUs (NCCL; on one GPU FSDP1 falls back to NO_SHARD and gathers nothing). Not yet run on a GPU.
#
#   accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/sharded-training/fsdp_rate_limiter_memory_cuda.py
import torch
from accelerate import Accelerator
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

import _claims

accelerator = Accelerator()
assert accelerator.device.type == "cuda", "this proof needs CUDA GPUs"
UNITS, WIDTH, SLEEP_CYCLES = 8, 4096, 5_000_000  # ~2.5 ms of GPU time per unit at ~2 GHz
unit_bytes = (WIDTH * WIDTH + WIDTH) * 4  # one unit's unsharded fp32 parameters


class Slow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        torch.cuda._sleep(SLEEP_CYCLES)  # keeps the GPU busy while the CPU thread goes on issuing
        return self.linear(x)


def peak_units_in_forward(**fsdp_kwargs):
    torch.manual_seed(0)
    units = [FSDP(Slow(), device_id=accelerator.device, **fsdp_kwargs) for _ in range(UNITS)]
    model = FSDP(torch.nn.Sequential(*units), device_id=accelerator.device, **fsdp_kwargs)
    x = torch.randn(64, WIDTH, device=accelerator.device)
    with torch.no_grad():
        model(x)  # warm-up: the allocator's pools, the execution order
        torch.cuda.synchronize()
        before = torch.cuda.memory_stats()["active_bytes.all.current"]
        torch.cuda.reset_peak_memory_stats()
        model(x)
        torch.cuda.synchronize()
    return (torch.cuda.memory_stats()["active_bytes.all.peak"] - before) / unit_bytes


limited = peak_units_in_forward()  # limit_all_gathers left out: the default, True
unlimited = peak_units_in_forward(limit_all_gathers=False)
_claims.at_most(
    "rate_limiter_caps_unsharded_units",
    measured=limited,
    control=unlimited,
    tolerance=3.5,  # the unit computing and the two whose all-gathers may be in flight, plus activations
    units=UNITS,
    unit_mib=unit_bytes / 2**20,
)
