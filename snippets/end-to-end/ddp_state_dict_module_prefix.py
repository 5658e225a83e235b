# Why checkpoints saved from a prepared model refuse to load: prepare() wraps the model in
# DistributedDataParallel, whose state_dict names every tensor "module.<name>". Loading that dict
# into the bare model raises "Unexpected key(s) ... module.0.weight"; the dict of
# accelerator.unwrap_model(model) has the bare names and loads. The reverse mistake, a bare dict
# loaded into the DDP wrapper, raises too ("Missing key(s) ... module.0.weight").
# Also: prepare() on the raw module a second time (as the handout does before testing) builds a second
# DDP wrapper around the same module.
# Negative controls: the same load with the unwrapped model's state_dict succeeds; prepare() on the
# already prepared wrapper returns it unchanged.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/end-to-end/ddp_state_dict_module_prefix.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.nn.parallel import DistributedDataParallel

import _claims

accelerator = Accelerator()
set_seed(0)


def build():
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


model = build()
model_engine = accelerator.prepare(model)  # DistributedDataParallel when 2 processes run

wrapped_keys = list(model_engine.state_dict())
unwrapped_keys = list(accelerator.unwrap_model(model_engine).state_dict())  # what save_pretrained/save should see


def load_error(target, state_dict):
    """The error message load_state_dict raises, or None when it loads."""
    try:
        target.load_state_dict(state_dict)  # strict=True, the default
        return None
    except RuntimeError as error:
        return " ".join(str(error).split())


wrapped_into_plain = load_error(build(), model_engine.state_dict())
unwrapped_into_plain = load_error(build(), accelerator.unwrap_model(model_engine).state_dict())
unwrapped_into_wrapper = load_error(model_engine, accelerator.unwrap_model(model_engine).state_dict())

# The handout prepares again before testing. prepare() marks the wrapper it returns as prepared, not the
# module inside, so the wrapper comes back unchanged but the original module gets a second DDP wrapper.
same_wrapper_again = accelerator.prepare(model_engine)
raw_module_again = accelerator.prepare(model)

_claims.equal(
    "wrapped_keys_start_with_module",
    measured=sum(key.startswith("module.") for key in wrapped_keys),
    control=sum(key.startswith("module.") for key in unwrapped_keys),
    expected=len(wrapped_keys),
    wrapper=type(model_engine).__name__,
    wrapped_keys=wrapped_keys,
    unwrapped_keys=unwrapped_keys,
)
_claims.equal(
    "wrapped_state_dict_rejected_by_plain_model",
    # the load raises, and for the reason the page gives: the wrapper's "module." names are not the model's
    measured=int(wrapped_into_plain is not None and 'Unexpected key(s) in state_dict: "module.0.weight"' in wrapped_into_plain),
    control=int(unwrapped_into_plain is not None),
    expected=1,
    error=wrapped_into_plain,
    bare_dict_into_wrapper_error=unwrapped_into_wrapper,
)
_claims.equal(
    "second_prepare_of_raw_module_wraps_again",
    # a NEW DistributedDataParallel around the same module, not the wrapper, not the bare module handed back
    measured=int(isinstance(raw_module_again, DistributedDataParallel) and raw_module_again is not model_engine
                 and raw_module_again.module is model_engine.module),
    control=int(isinstance(same_wrapper_again, DistributedDataParallel) and same_wrapper_again is not model_engine),
    expected=1,
    returned_type=type(raw_module_again).__name__,
    both_wrap_same_module=getattr(raw_module_again, "module", None) is getattr(model_engine, "module", model_engine),
)
