# Four errors that DDP and Accelerate raise, each triggered on purpose, caught, and compared with the
# same call once the cause is removed. Every one of them is raised on BOTH ranks, so the process group
# stays usable (no rank is left waiting in a collective).
#   1. DDP around a model with no trainable parameter (accelerator.prepare on MULTI_CPU wraps anyway).
#   2. Ranks that built different models (DDP compares parameter shapes across ranks at wrap time).
#   3. A second Accelerator asking for another mixed precision in the same process.
#   4. gather() of tensors whose shapes differ across ranks, caught by ACCELERATE_DEBUG_MODE.
# Negative controls: the same call with the cause removed (trainable parameters, identical models,
# the same settings, tensors padded with pad_across_processes).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/failures/ddp_accelerate_error_messages.py
import torch
from accelerate import Accelerator
from accelerate.state import PartialState

import _claims

accelerator = Accelerator()
rank = accelerator.process_index


def error_of(call):
    """The message of the exception `call` raises, or "" when it runs."""
    try:
        call()
        return ""
    except Exception as error:  # noqa: BLE001  the message is the evidence
        return f"{type(error).__name__}: {error}"


def model(frozen=False, extra_layer=False):
    torch.manual_seed(0)
    layers = [torch.nn.Linear(4, 4)] + ([torch.nn.Linear(4, 4)] if extra_layer else [])
    net = torch.nn.Sequential(*layers)
    net.requires_grad_(not frozen)
    return net


# 1. Nothing to synchronise: every parameter frozen.
frozen_error = error_of(lambda: accelerator.prepare(model(frozen=True)))
trainable_error = error_of(lambda: accelerator.prepare(model()))

# 2. Rank 1 built one layer more (a config read differently, a branch on rank).
differ_error = error_of(lambda: accelerator.prepare(model(extra_layer=rank == 1)))
same_error = error_of(lambda: accelerator.prepare(model(extra_layer=False)))

# 3. The state behind every Accelerator is a per-process singleton, fixed by the first one.
precision_error = error_of(lambda: Accelerator(mixed_precision="bf16"))
same_settings_error = error_of(lambda: Accelerator())

# 4. gather() needs the same shape on every rank. Debug mode checks the shapes first (one extra
#    gather_object of shapes) and raises on every rank instead of letting the collective go wrong.
PartialState().debug = True  # what ACCELERATE_DEBUG_MODE=1 (or `accelerate launch --debug`) sets
try:
    uneven = torch.arange(2 + rank, dtype=torch.float32)  # rank 0: 2 values, rank 1: 3 values
    gather_error = error_of(lambda: accelerator.gather(uneven))
    padded_error = error_of(lambda: accelerator.gather(accelerator.pad_across_processes(uneven)))
finally:
    PartialState().debug = False

_claims.equal(
    "ddp_refuses_model_without_trainable_parameters",
    measured=int(frozen_error.startswith("RuntimeError: ")
                 and "DistributedDataParallel is not needed when a module doesn't have any parameter that "
                 "requires a gradient." in frozen_error),
    control=int("DistributedDataParallel is not needed" in trainable_error),
    expected=1,
    error=frozen_error,
    control_error=trainable_error,  # "" when the trainable model prepared
)
_claims.equal(
    "ddp_detects_different_models_at_wrap_time",
    # Each rank names itself first (the C++ count check stops at the first rank whose count differs).
    measured=int(("DDP expects same model across all ranks, but "
                  + ("Rank 1 has 4 params, while rank 0 has inconsistent 2 params." if rank == 1
                     else f"Rank {rank} has 2 params, while rank 1 has inconsistent 4 params.")) in differ_error),
    control=int("DDP expects same model across all ranks" in same_error),
    expected=1,
    error=differ_error[:400],
    control_error=same_error[:400],  # "" when the identical models prepared
)
_claims.equal(
    "accelerator_state_cannot_change_in_process",
    # The whole text the page quotes, flag included, and its type.
    measured=int(precision_error == "ValueError: AcceleratorState has already been initialized and cannot be "
                 "changed, restart your runtime completely and pass `mixed_precision='bf16'` to `Accelerator()`."),
    control=int("AcceleratorState has already been initialized" in same_settings_error),
    expected=1,
    error=precision_error,
    control_error=same_settings_error,  # "" when the second Accelerator() was created
)
_claims.equal(
    "debug_mode_names_gather_shape_mismatch",
    measured=int(gather_error.startswith("DistributedOperationException: ")
                 and "Cannot apply desired operation due to shape mismatches" in gather_error
                 and "Process 0: [2]" in gather_error and "Process 1: [3]" in gather_error),
    control=int("Cannot apply desired operation due to shape mismatches" in padded_error),
    expected=1,
    error=gather_error[:500],
    control_error=padded_error[:500],  # "" when the padded gather ran
)
