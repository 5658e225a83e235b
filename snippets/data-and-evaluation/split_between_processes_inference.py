# Distributed inference with accelerator.split_between_processes on 2 ranks.
#   * 7 prompts are cut into CONTIGUOUS chunks: rank 0 gets prompts 0-3, rank 1 gets 4-6. gather_object
#     concatenates the per-rank result lists in rank order, so the results come back in prompt order.
#     A strided split (prompt i to rank i % 2, how prepare() and DistributedSampler deal samples)
#     gathered the same way comes back out of order.
#   * Tensors: with apply_padding=True every rank gets 4 rows (the last input repeated), so gather()
#     can concatenate them; drop the padded row and the 7 outputs equal one process running all 7.
#   * Without apply_padding the chunks have 4 and 3 rows, and accelerator.gather (an all_gather that
#     assumes every rank sends its own shape) breaks: shown in 2 forked children with their own gloo
#     group and a 20 s hard limit, never in the launched ranks: neither child ends with the 7 rows in
#     order (gloo aborts the child with 3 rows; the other raises or, depending on timing, finishes with
#     wrong rows). With apply_padding both children get all 7 rows back in order.
# Negative controls: a strided split (for the order); no apply_padding (unequal row counts); for the
# unpadded gather, the same gather with apply_padding=True.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/data-and-evaluation/split_between_processes_inference.py
import torch
from accelerate import Accelerator, PartialState
from accelerate.utils import gather_object

import _claims
from _forked_pair import run_pair

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
prompts = [f"prompt {i}" for i in range(7)]


def generate(prompt):  # stands in for a model call; the result names the prompt it answered
    return prompt.upper()


# --- 1. strings: contiguous chunks, gathered back in order ---
with accelerator.split_between_processes(prompts) as my_prompts:
    chunk = list(my_prompts)
    results = [generate(p) for p in my_prompts]
in_order = gather_object(results)  # list of rank 0's results, then rank 1's
strided = gather_object([generate(p) for p in prompts[rank::world]])  # control: prompt i to rank i % 2
expected = [generate(p) for p in prompts]  # one process, all prompts
_claims.equal(
    "gathered_results_keep_prompt_order",
    measured=in_order == expected,
    control=strided == expected,
    expected=True,
    my_prompts=chunk,
    gathered=in_order,
    strided_gathered=strided,
)

# --- 2. tensors: apply_padding makes the shapes equal so gather() works ---
torch.manual_seed(0)
model = torch.nn.Linear(3, 2)  # the same weights on both ranks (same seed)
inputs = torch.randn(7, 3)
with torch.no_grad():
    reference = model(inputs)  # one process, all 7 rows
    with accelerator.split_between_processes(inputs, apply_padding=True) as rows:
        padded_rows = len(rows)
        outputs = accelerator.gather(model(rows.to(accelerator.device)))[: len(inputs)]  # drop the padded row
    with accelerator.split_between_processes(inputs) as rows:
        unpadded_rows = len(rows)
    # Control for the order: rows dealt i -> rank i % 2, padded to equal length, gathered the same way.
    strided_rows = accelerator.pad_across_processes(inputs[rank::world].to(accelerator.device))
    strided_outputs = accelerator.gather(model(strided_rows))[: len(inputs)]
row_counts = gather_object([padded_rows])
row_counts_unpadded = gather_object([unpadded_rows])
_claims.equal(
    "apply_padding_gives_equal_row_counts",
    measured=row_counts,
    control=row_counts_unpadded,  # [4, 3]: accelerator.gather could not concatenate these
    expected=[4, 4],
)
_claims.at_most(
    "gathered_outputs_match_one_process",
    measured=(outputs.cpu() - reference).abs().max().item(),
    control=(strided_outputs.cpu() - reference).abs().max().item(),  # strided split: rows out of order
    tolerance=1e-6,
    gathered_rows=len(outputs),
)


# --- 3. gather() of the unpadded chunks (4 and 3 rows): in forked children, never in the launched ranks ---
def rows_back_in_order(pad):
    def per_rank(rank):
        PartialState().process_index = rank  # the child's own copy of the state: split for this child's rank
        with torch.no_grad(), accelerator.split_between_processes(inputs, apply_padding=pad) as rows:
            gathered = accelerator.gather(model(rows))[: len(inputs)]
        # how many of the 7 output rows came back equal to one process's output at the same position
        return sum(bool((a - b).abs().max() <= 1e-6) for a, b in zip(gathered, reference))

    return per_rank


def complete(outcome):
    """How many of the 2 children finished holding all 7 output rows in place."""
    return sum(status == "finished" and value == len(inputs) for status, value in outcome.values())


if accelerator.is_main_process:
    padded, padded_codes = run_pair(rows_back_in_order(pad=True), time_limit=20.0)
    unpadded, unpadded_codes = run_pair(rows_back_in_order(pad=False), time_limit=20.0)
    # Judged: children left with the 7 rows in order. Without padding the child with 3 rows is aborted
    # by gloo, and the other either raises or (timing) finishes with wrong rows: 0 either way.
    _claims.equal(
        "gather_of_unpadded_chunks_breaks",
        measured=complete(unpadded),  # split without apply_padding: 4 and 3 rows
        control=complete(padded),  # apply_padding=True: 4 and 4 rows, both children get all 7 back
        expected=0,
        with_padding={str(rank): value for rank, value in sorted(padded.items())},  # (status, rows in place)
        without_padding={str(rank): value for rank, value in sorted(unpadded.items())},
        exit_codes=[padded_codes, unpadded_codes],
    )
accelerator.wait_for_everyone()
