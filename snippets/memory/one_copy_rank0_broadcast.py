# One copy of the weights in CPU RAM instead of one per process: rank 0 builds the real model, every
# other rank builds it on the meta device (accelerate's init_empty_weights), and the weights reach them
# by broadcast from rank 0. These are the steps of Accelerate's FSDP2 cpu_ram_efficient_loading
# (fsdp2_prepare_model): state_dict, move to meta, fully_shard, then the same function it calls,
# fsdp2_load_full_state_dict, which broadcasts each full parameter from rank 0 and keeps this rank's
# shard (distribute_tensor).
# Measured on rank 1: the peak of its resident memory (VmHWM) over the whole load, as a fraction of the
# model's bytes; on rank 0: the loaded weights against its originals. Negative controls: the same load
# with rank 1 building real weights too (what every process does by default), and the same sharded meta
# model given storage (to_empty) without the broadcast.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/memory/one_copy_rank0_broadcast.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import ctypes
import gc

import torch
from accelerate import Accelerator, init_empty_weights
from accelerate.utils.fsdp_utils import fsdp2_load_full_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import _claims

accelerator = Accelerator()
rank = accelerator.process_index
mesh = init_device_mesh("cpu", (accelerator.num_processes,))
LAYERS = 8  # 8 weights of 2304 x 4096 fp32, 36 MiB each, 288 MiB in all
model_bytes = LAYERS * 2304 * 4096 * 4


def build():
    torch.manual_seed(0)
    return torch.nn.Sequential(*(torch.nn.Linear(4096, 2304, bias=False) for _ in range(LAYERS)))


def status_kib(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def load(real):
    """Build (real weights, or on meta), shard and load as fsdp2_prepare_model does; peak RSS growth."""
    # Free what earlier code left behind and hand the freed heap pages back to the OS (glibc's
    # malloc_trim): otherwise the build can reuse pages that are already resident and not show in RSS.
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # reset VmHWM, the peak resident set, to the current RSS
    before = status_kib("VmRSS")
    if real:
        model = build()
    else:
        with init_empty_weights():  # parameters on the meta device: no storage
            model = build()
    full_sd = model.state_dict()  # fsdp2_prepare_model's original_sd; only rank 0's is ever read
    model = model.to("meta")  # shard on meta, then load
    fully_shard(model, mesh=mesh)
    fsdp2_load_full_state_dict(accelerator, model, full_sd)  # broadcast from rank 0, keep this rank's shard
    peak = (status_kib("VmHWM") - before) * 1024 / model_bytes
    return model, full_sd, peak


# warm-up: the first fully_shard and load allocate ~30 MiB of their own (imports, process-group state), once
warm_up = torch.nn.Sequential(torch.nn.Linear(2, 2))
warm_sd = warm_up.state_dict()
fully_shard(warm_up.to("meta"), mesh=mesh)
fsdp2_load_full_state_dict(accelerator, warm_up, warm_sd)


def elements_differing(model, reference):
    """On rank 0, how many gathered weight elements differ from rank 0's originals (both ranks gather)."""
    differing = 0
    for name, parameter in model.named_parameters():
        full = parameter.full_tensor()  # a collective: gathers both ranks' shards
        if rank == 0:
            differing += (full != reference[name]).sum().item()  # NaN != x counts as differing
    return differing


# --- cpu_ram_efficient_loading: real weights on rank 0 only ---------------------------------------------
model, full_sd, peak = load(real=rank == 0)
local_shard_bytes = sum(p.to_local().numel() * 4 for p in model.parameters())
differing = elements_differing(model, full_sd)

# --- control for the weights: the same sharded meta model, given storage without the broadcast ------------
with init_empty_weights():
    unsynced = build()
fully_shard(unsynced, mesh=mesh)
unsynced.to_empty(device="cpu")  # storage, but nobody sent the values
unsynced_differing = elements_differing(unsynced, full_sd)
elements = sum(p.numel() for p in model.parameters())
del model, full_sd, unsynced

# --- control for the memory: the same load with rank 1 building real weights as well --------------------
control_model, control_sd, control_peak = load(real=True)
del control_model, control_sd

if rank != 0:
    _claims.at_most(
        "other_rank_never_holds_a_full_copy",
        measured=peak,
        control=control_peak,
        tolerance=0.8,  # its half (0.5) plus one 36 MiB weight in flight (0.125), with room for noise
        model_mib=model_bytes / 2**20,
        peak_growth_mib=peak * model_bytes / 2**20,
        control_peak_growth_mib=control_peak * model_bytes / 2**20,
        local_shard_mib=local_shard_bytes / 2**20,
    )
else:
    _claims.at_most(
        "broadcast_weights_equal_rank_0s",
        measured=differing / elements,  # fraction of the elements that differ
        control=unsynced_differing / elements,
        tolerance=0.0,
        elements=elements,
        rank0_peak_growth=peak,
        local_shard_mib=local_shard_bytes / 2**20,
    )
