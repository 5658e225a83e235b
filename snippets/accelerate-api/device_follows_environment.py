# How Accelerator picks its device and backend: from the launcher's environment, not by probing "the
# first GPU".
#   1. ACCELERATE_USE_CPU=true (what `accelerate launch --cpu` or `Accelerator(cpu=True)` amount to)
#      makes 2 launched processes a MULTI_CPU job on gloo. Negative control: the same decision
#      (PartialState._prepare_backend) with the flag flipped; on a machine without GPUs that is
#      backend None, i.e. 2 processes that each think they are alone.
#   2. The single-process default device follows a fixed order of checks (PartialState.default_device):
#      MPS before CUDA before XPU, CPU last. We fake which accelerators are "available" with
#      unittest.mock and read the answer. Negative control: take the winner away and the next one
#      in the order answers (MPS gone: CUDA; CUDA gone: XPU; XPU gone: CPU).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/accelerate-api/device_follows_environment.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import os
from unittest import mock

import accelerate.state
import torch
from accelerate import Accelerator
from accelerate.state import PartialState
from accelerate.utils import parse_flag_from_env

import _claims

accelerator = Accelerator()
use_cpu = parse_flag_from_env("ACCELERATE_USE_CPU")  # AcceleratorState reads it; PartialState() does not
state = PartialState()  # the already initialised shared state: this call sets nothing up
flipped_backend, flipped_type = state._prepare_backend(cpu=not use_cpu)  # only computes, changes nothing

_claims.equal(
    "backend_follows_accelerate_use_cpu",
    measured=str(accelerator.state.backend),
    control=str(flipped_backend),
    expected="gloo" if use_cpu else "nccl",
    device=str(accelerator.device),
    distributed_type=str(accelerator.distributed_type),
    with_flag_flipped=str(flipped_type),
    num_processes=accelerator.num_processes,
)

CHECKS = ["mps", "mlu", "sdaa", "musa", "npu", "hpu", "xpu", "neuron"]  # accelerate.state's is_*_available


def default_device_if(*available):
    """PartialState.default_device as it would answer on a machine where only `available` exist."""
    patches = [mock.patch.object(accelerate.state, f"is_{name}_available", return_value=name in available) for name in CHECKS]
    patches.append(mock.patch.object(torch.cuda, "is_available", return_value="cuda" in available))
    patches.append(mock.patch.dict(os.environ))  # default_device sets PYTORCH_ENABLE_MPS_FALLBACK for MPS
    for patch in patches:
        patch.start()
    try:
        return str(state.default_device)
    finally:
        for patch in reversed(patches):
            patch.stop()


# Each step of the order: the winner with every accelerator ranked below it also "available".
# Control: the same calls with the winner taken away; the next one in the order must answer instead.
ORDER = [("mps", "cuda", "xpu"), ("cuda", "xpu"), ("xpu",), ()]
_claims.equal(
    "default_device_checks_mps_then_cuda_then_xpu",
    measured=[default_device_if(*available) for available in ORDER],
    control=[default_device_if(*available[1:]) for available in ORDER],
    expected=["mps", "cuda", "xpu", "cpu"],
)
