# device_map="auto" does not load the whole model and then move its layers: accelerate's
# load_checkpoint_and_dispatch reads a sharded checkpoint one shard at a time into a model built on the meta
# device (init_empty_weights) and puts each tensor straight where the device map assigns it; the layers
# mapped to "disk" are written to the offload folder and never sit in RAM together.
# Measured on rank 0: the peak of its resident memory (VmHWM) during the call, as a fraction of the
# model's bytes, for 6 Linear(3072, 3072) weights (36 MiB each, 216 MiB in fp32) saved as 6 torch.save
# shards and loaded with device_map="auto" and max_memory={"cpu": "80MiB"} (one layer in RAM, five on
# disk). Each weight is above glibc's largest mmap threshold (32 MiB), so its memory goes back to the OS
# as soon as it is freed and RSS shows only what is alive.
# Negative control: the same call with every layer mapped to the CPU (device_map={"": "cpu"}), which must
# end with the whole model in RAM.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/memory/device_map_loads_in_place.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import ctypes
import gc
import json
import os
import tempfile

import torch
from accelerate import Accelerator, init_empty_weights, load_checkpoint_and_dispatch

import _claims

accelerator = Accelerator()
LAYERS, WIDTH = 6, 3072  # 6 weights of 3072 x 3072 fp32, 36 MiB each, 216 MiB in all
model_bytes = LAYERS * WIDTH * WIDTH * 4


def build():
    return torch.nn.Sequential(*(torch.nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(LAYERS)))


def save_sharded(model, folder):
    """One torch.save file per tensor and the index that names them: a sharded checkpoint."""
    weight_map = {}
    for name, tensor in model.state_dict().items():
        torch.save({name: tensor}, os.path.join(folder, f"{name}.bin"))
        weight_map[name] = f"{name}.bin"
    with open(os.path.join(folder, "pytorch_model.bin.index.json"), "w") as index:
        json.dump({"weight_map": weight_map}, index)


def status_kib(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def peak_growth(checkpoint, **dispatch):
    """Peak RSS growth during load_checkpoint_and_dispatch, as a fraction of the model's bytes; the model."""
    with init_empty_weights():  # parameters on the meta device: no storage
        model = build()
    # Free what earlier code left behind and hand the freed heap pages back to the OS (glibc's malloc_trim),
    # so that the load cannot reuse pages that are still resident and hide its growth from RSS.
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # reset VmHWM, the peak resident set, to the current RSS
    before = status_kib("VmRSS")
    with tempfile.TemporaryDirectory() as offload:
        model = load_checkpoint_and_dispatch(model, checkpoint, offload_folder=offload, **dispatch)
        peak = (status_kib("VmHWM") - before) * 1024 / model_bytes
    return peak, model


# Accelerate runs gc.collect() after every shard; freezing the objects the imports created keeps each of those
# collections from walking them (0.7 s a shard on this machine). Tensors are freed by reference counting
# either way, so this changes the time, not the memory.
gc.freeze()
try:
    if accelerator.is_main_process:  # one rank measures: the other would only double the disk traffic
        with tempfile.TemporaryDirectory() as checkpoint:
            torch.manual_seed(0)
            save_sharded(build(), checkpoint)
            peak, model = peak_growth(checkpoint, device_map="auto", max_memory={"cpu": "80MiB"})
            placement = dict(model.hf_device_map)
            on_meta = sum(p.numel() for p in model.parameters() if p.is_meta)  # the layers left on disk
            del model
            control_peak, control = peak_growth(checkpoint, device_map={"": "cpu"})
            del control
finally:
    gc.unfreeze()

if accelerator.is_main_process:
    _claims.at_most(
        "device_map_never_holds_the_whole_model",
        measured=peak,
        control=control_peak,
        tolerance=0.75,  # one layer kept, one shard being read, one weight being written to disk: 3 of 6
        model_mib=model_bytes / 2**20,
        layers_on_disk=sum(device == "disk" for device in placement.values()),
        layers_on_cpu=sum(device == "cpu" for device in placement.values()),
        parameters_left_on_meta=on_meta,
        peak_growth_mib=peak * model_bytes / 2**20,
        control_peak_growth_mib=control_peak * model_bytes / 2**20,
    )
