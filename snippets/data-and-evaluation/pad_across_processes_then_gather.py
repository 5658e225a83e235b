# Collecting predictions of different lengths: rank 0 generated 3 tokens, rank 1 generated 5.
# accelerator.gather() concatenates equal-shaped tensors; with unequal shapes gloo's all_gather breaks
# (one process aborts, the other errors or keeps wrong numbers), so that control runs in 2 forked
# children with their own process group and a hard time limit. accelerator.pad_across_processes()
# first pads every rank's tensor to the longest length (here with -100), then gather works and the
# padding is stripped again. With ACCELERATE_DEBUG_MODE (PartialState().debug) gather checks the shapes first
# and raises a readable error on every rank instead. A batch of sequences, shape (2, length), is padded on
# dim 1, the length; padding dim 0 (the batch) leaves the lengths unequal.
# Left out, pad_index is 0: the positions added to rank 0's sequences hold 0.
# Negative controls: the same gather without pad_across_processes; padding dim 0 instead of dim 1;
# pad_index=-100 given.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/data-and-evaluation/pad_across_processes_then_gather.py
import torch
from accelerate import Accelerator, PartialState
from accelerate.utils.operations import DistributedOperationException

import _claims
from _forked_pair import run_pair

PAD = -100  # a value no real token id takes, so the padding can be found and dropped
accelerator = Accelerator()


def predictions(rank):
    """What rank r 'generated': 3 + 2r token ids (rank 0: 3 tokens, rank 1: 5)."""
    return torch.arange(3 + 2 * rank) + 10 * (rank + 1)


def collect(rank, pad):
    """Gather every rank's predictions; return how many ranks' sequences come back exactly."""
    mine = predictions(rank)
    if pad:
        mine = accelerator.pad_across_processes(mine, dim=0, pad_index=PAD)  # to the longest length: 5
    gathered = accelerator.gather(mine[None])  # one row per rank: shape (2, 5)
    rows = [row[row != PAD] for row in gathered]  # strip the padding again
    return sum(torch.equal(row, predictions(r)) for r, row in enumerate(rows)), gathered.tolist()


state = PartialState()
debug = state.debug

# --- 1. in the launched ranks: pad, gather, strip (in debug mode, so that unequal shapes would raise
#        on every rank here instead of breaking the launched ranks' process group) ---
try:
    state.debug = True
    recovered, gathered = collect(accelerator.process_index, pad=True)
except DistributedOperationException as error:
    recovered, gathered = 0, " ".join(str(error).split())[-120:]
finally:
    state.debug = debug

# --- 2. debug mode: gather checks the shapes first and raises on every rank ---
errors = {}
try:
    state.debug = True  # what ACCELERATE_DEBUG_MODE=1 sets; restored below
    for label, tensor in (
        ("unpadded", predictions(accelerator.process_index)),
        ("padded", accelerator.pad_across_processes(predictions(accelerator.process_index), pad_index=PAD)),
    ):
        try:
            accelerator.gather(tensor)
            errors[label] = 0
        except DistributedOperationException as error:
            errors[label] = 1
            errors[label + "_message"] = " ".join(str(error).split())[-120:]
finally:
    state.debug = debug
_claims.equal(
    "debug_mode_names_the_shape_mismatch",
    measured=errors["unpadded"],  # raised before any data moved
    control=errors["padded"],  # the same check on padded tensors passes
    expected=1,
    message=errors.get("unpadded_message"),
)


# --- 2b. a batch of sequences, (2, length): the length is dim 1, so pad dim 1 ---
def generated_batch(rank):
    """Rank r 'generated' 2 sequences of 3 + 2r tokens: shape (2, 3 + 2r), batch on dim 0."""
    return torch.stack([predictions(rank), predictions(rank) + 100])


def gather_batch(dim):
    """Pad on `dim`, gather (debug mode on: a shape mismatch raises instead of breaking the group)."""
    padded = accelerator.pad_across_processes(generated_batch(accelerator.process_index), dim=dim, pad_index=PAD)
    state.debug = True
    try:
        gathered = accelerator.gather(padded)  # (4, 5): 2 rows per rank
    except DistributedOperationException:
        return 0, list(padded.shape)
    finally:
        state.debug = debug
    rows = [row[row != PAD] for row in gathered]
    wanted = [row for r in range(accelerator.num_processes) for row in generated_batch(r)]
    return sum(torch.equal(row, want) for row, want in zip(rows, wanted)), list(gathered.shape)


rows_dim1, shape_dim1 = gather_batch(dim=1)
rows_dim0, shape_dim0 = gather_batch(dim=0)  # the wrong dimension: the lengths still differ
_claims.equal(
    "pad_dim1_then_gather_recovers_every_row",
    measured=rows_dim1,  # rows (sequences) recovered exactly, of 4
    control=rows_dim0,
    expected=2 * accelerator.num_processes,
    gathered_shape_dim1=shape_dim1,
    local_shape_after_padding_dim0=shape_dim0,
)


# --- 2c. the value it pads with when pad_index is left out ---
def fill_of_the_shorter_rank(**pad_index):
    """The values pad_across_processes(dim=1) put after rank 0's 3 tokens (its batch is padded to 5)."""
    padded = accelerator.pad_across_processes(generated_batch(accelerator.process_index), dim=1, **pad_index)
    state.debug = True  # unequal shapes (nothing padded) raise on every rank instead of breaking the group
    try:
        gathered = accelerator.gather(padded)  # rank 0's 2 rows come first
    except DistributedOperationException:
        return None
    finally:
        state.debug = debug
    return sorted(set(gathered[:2, 3:].flatten().tolist()))


_claims.equal(
    "pad_index_defaults_to_zero",
    measured=fill_of_the_shorter_rank(),  # pad_index left out
    control=fill_of_the_shorter_rank(pad_index=PAD),
    expected=[0],
)

# --- 3. without padding the gather itself breaks: shown in forked children, never in the launched ranks ---
def gather_in_child(pad):
    return lambda rank: collect(rank, pad)[0]  # in the child, `rank` is the child's own rank


if accelerator.is_main_process:
    padded, padded_codes = run_pair(gather_in_child(pad=True), time_limit=20.0)
    unpadded, unpadded_codes = run_pair(gather_in_child(pad=False), time_limit=20.0)
    _claims.equal(
        "pad_then_gather_recovers_every_sequence",
        measured=sum(value for status, value in padded.values() if status == "finished"),  # sequences recovered
        control=sum(value for status, value in unpadded.values() if status == "finished"),  # no padding
        expected=4,  # 2 children x 2 sequences each
        launched_ranks_recovered=recovered,
        launched_ranks_gathered=gathered,
        with_padding={str(rank): value for rank, value in sorted(padded.items())},
        without_padding={str(rank): value for rank, value in sorted(unpadded.items())},
        exit_codes_without_padding=unpadded_codes,
    )
accelerator.wait_for_everyone()
