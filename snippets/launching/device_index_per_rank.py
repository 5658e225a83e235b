# Which GPU does each process use, and why do all processes end up on GPU 0 without it? A CUDA call
# with no device goes to the *current* device, which is 0 in every fresh process. Accelerate's
# PartialState.set_device picks device `local_process_index % device_count()` and makes it current
# with torch.cuda.set_device. There are no GPUs here, so Accelerate's own set_device runs against a
# stand-in torch.cuda (device_count, set_device and current_device replaced for the call; the rest of
# the method is the library's), on a stand-in state with this rank's real local_process_index:
#  * 2 devices: rank r's current device becomes r. Control: the same state with the set_device call
#    skipped, where every rank stays on the default device 0.
#  * 1 device, 2 processes: both get cuda:0, no error. Control: the same with 2 devices.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/launching/device_index_per_rank.py
import contextlib
from types import SimpleNamespace

import torch
from accelerate import Accelerator, PartialState
from accelerate.utils import DistributedType

import _claims

accelerator = Accelerator()


@contextlib.contextmanager
def stand_in_cuda(devices):
    """torch.cuda as a machine with `devices` GPUs sees it; the current device starts at 0, as in CUDA."""
    current = {"index": 0}
    replaced = {
        "device_count": lambda: devices,
        "set_device": lambda device: current.update(index=torch.device(device).index),
        "current_device": lambda: current["index"],
    }
    saved = {name: getattr(torch.cuda, name) for name in replaced}
    for name, function in replaced.items():
        setattr(torch.cuda, name, function)
    try:
        yield current
    finally:
        for name, function in saved.items():
            setattr(torch.cuda, name, function)


def device_after_setup(devices, call_set_device=True):
    """The device index that is current on this rank once Accelerate's set_device has run (or not)."""
    state = SimpleNamespace(device=None, distributed_type=DistributedType.MULTI_GPU, _cpu=False,
                            local_process_index=accelerator.local_process_index)
    with stand_in_cuda(devices) as current:
        if call_set_device:
            PartialState.set_device(state)
        return torch.cuda.current_device(), (state.device.index if state.device is not None else None)


def on_every_rank(value):
    return accelerator.gather(torch.tensor([value])).tolist()


current, chosen = device_after_setup(devices=2)
_claims.equal(
    "each_rank_is_made_current_on_its_local_gpu",
    measured=on_every_rank(current),
    control=on_every_rank(device_after_setup(devices=2, call_set_device=False)[0]),
    expected=list(range(accelerator.num_processes)),
    device_chosen_per_rank=on_every_rank(chosen),
    local_rank_per_rank=on_every_rank(accelerator.local_process_index),
)

_claims.equal(
    "two_processes_one_gpu_share_cuda_0",
    measured=on_every_rank(device_after_setup(devices=1)[0]),
    control=on_every_rank(device_after_setup(devices=2)[0]),
    expected=[0] * accelerator.num_processes,
)
