# Which tools Accelerate really uses for "model optimisation": PyTorch's own torch.autocast for
# mixed precision (no NVIDIA Apex) and torch.compile for graph compilation (dynamo_backend), not
# TorchScript. The autocast context is built by get_mixed_precision_context_manager
# (accelerate/utils/modeling.py); the source is searched for every apex or TorchScript call.
# Negative controls: with mixed precision off (native_amp False, what mixed_precision="no" gives)
# the same function returns a do-nothing context; the same source search finds the calls to
# torch.autocast and torch.compile.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/accelerate-api/accelerate_uses_native_amp_not_apex.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import pathlib
import re

import accelerate
import torch
from accelerate import Accelerator
from accelerate.utils.modeling import get_mixed_precision_context_manager

import _claims

accelerator = Accelerator(mixed_precision="bf16")
device_type = accelerator.device.type


def context_seen(context):
    """Which class the context is, and what autocast state the code inside it sees."""
    with context:
        return [type(context).__module__ + "." + type(context).__name__,
                torch.is_autocast_enabled(device_type), str(torch.get_autocast_dtype(device_type))]


# The context accelerator.autocast() enters, and prepare() wraps every forward in.
_claims.equal(
    "autocast_is_torch_autocast",
    measured=context_seen(get_mixed_precision_context_manager(accelerator.native_amp, accelerator.autocast_handler)),
    control=context_seen(get_mixed_precision_context_manager(native_amp=False)),
    expected=["torch.amp.autocast_mode.autocast", True, "torch.bfloat16"],
    native_amp=accelerator.native_amp,
)

# Calls, not words: an import of apex, or a call into TorchScript (torch.jit.script/trace/...),
# anywhere in accelerate's code; "(\w" skips docstrings that write "torch.compile()".
root = pathlib.Path(accelerate.__file__).parent
sources = {path: path.read_text(encoding="utf-8") for path in root.rglob("*.py")}


def files_matching(pattern):
    return sorted(str(p.relative_to(root.parent)) for p, text in sources.items() if re.search(pattern, text, re.M))


apex = files_matching(r"^\s*(import apex|from apex\b)|\bapex\.")
torchscript = files_matching(r"torch\.jit\.\w+\(\w")
native = files_matching(r"torch\.autocast\(\w") + files_matching(r"torch\.compile\(\w")
_claims.equal(
    "no_apex_or_torchscript_calls",
    measured=len(apex) + len(torchscript),
    control=len(native),
    expected=0,
    apex_files=apex,
    torchscript_files=torchscript,
    autocast_and_compile_files=native,
    files_searched=len(sources),
    files_saying_apex_at_all=len(files_matching(r"(?i)apex")),
    files_saying_torchscript_at_all=len(files_matching(r"(?i)torchscript")),
)
