# The nearest thing Accelerate has to "automatic tuning": find_executable_batch_size retries a
# training function with a smaller batch size each time it dies of out-of-memory. It tunes no
# hyper-parameter for quality; it only searches for a batch that fits. Since accelerate 1.9.0 the
# default step multiplies the batch size by 0.9 (up to 1.8.1 it halved it); reduce_batch_size_fn
# sets your own step.
# Negative control: any other error (here a RuntimeError that is not an out-of-memory message) is
# raised at once, after a single attempt.
#
#   accelerate launch --multi_gpu --num_processes 2 snippets/accelerate-api/find_executable_batch_size_retries.py
#   (on a CPU-only machine export ACCELERATE_USE_CPU=true first)
import gc

from accelerate import Accelerator
from accelerate.utils import find_executable_batch_size

import _claims

accelerator = Accelerator()
FITS = 100  # pretend memory holds at most 100 samples per step on this device
# Every attempt runs gc.collect(), slow in a process that has imported torch and transformers: move
# the objects that exist now out of the collector's sight while we run (gc.unfreeze() at the end).
gc.freeze()


def make_train(error):
    tried = []

    def train(batch_size):  # the decorator passes the batch size as the first argument
        tried.append(batch_size)
        if batch_size > FITS:
            raise error  # what torch raises when an allocation fails
        return batch_size

    return train, tried


# should_reduce_batch_size (accelerate/utils/memory.py) matches the message: a RuntimeError whose
# only argument contains " out of memory." (CUDA, XPU), "DefaultCPUAllocator: can't allocate memory", ...
train, tried = make_train(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
find_executable_batch_size(train, starting_batch_size=128)()

other, other_tried = make_train(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
try:
    find_executable_batch_size(other, starting_batch_size=128)()
except RuntimeError:
    pass  # not an out-of-memory message: no retry, the error reaches the caller

_claims.equal(
    "oom_retried_with_smaller_batches",
    measured=tried,
    control=other_tried,
    expected=[128, 115, 103, 92],  # int(b * 0.9) each time until b <= 100
    attempts=len(tried),
)
# The same measurement, read as the older default: halving (the release matrix runs this on 1.8.1).
_claims.equal("oom_halved_through_1_8_1", measured=tried, control=other_tried, expected=[128, 64])

# Your own step: 40 fewer samples each time (a rule no release uses by default).
custom = {"batch_size": 128}


def step_down_by_40():
    custom["batch_size"] -= 40
    return custom["batch_size"]


stepped, stepped_tried = make_train(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
try:  # the argument exists since 1.7.0; before, the call is refused and no batch size is tried
    find_executable_batch_size(stepped, starting_batch_size=128, reduce_batch_size_fn=step_down_by_40)()
except TypeError as refused:
    print(f"find_executable_batch_size refused reduce_batch_size_fn: {refused}")
_claims.equal(
    "reduce_batch_size_fn_sets_the_step",
    measured=stepped_tried,
    control=tried,
    expected=[128, 88],
)

gc.unfreeze()  # give the collector back every object it had before
