# Two edges of the metric recipes, 10 evaluation samples on 2 ranks, samples 0-5 "right":
#   * sum-then-divide under the default even_batches=True (batches of 4): each rank sums [correct, seen]
#     over its shard and accelerator.reduce sums them across ranks. The last round is completed with
#     samples 0-5, so the sums count 16 samples, 12 of them right (0.75): the same bias as a plain gather.
#     No collective runs inside the loop, so a default of even_batches=False (the mutant) cannot unpair
#     the ranks' collectives here, as it would metric_across_ranks.py's per-batch gathers.
#   * a custom batch_sampler without a batch_size attribute (batches of 2): gather_for_metrics cannot work
#     out the remainder (total_batch_size reads batch_sampler.batch_size) and returns the padded rows uncut.
#     (Accelerate 0.29.3 refuses such a sampler unless even_batches=False.)
# Negative controls: the same sums with even_batches=False (6 + 4 = 10 samples seen, 0.6); the same
# batches from a DataLoader built with batch_size=2.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/data-and-evaluation/metrics_padding_edges.py
import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration
from torch.utils.data import DataLoader, Sampler

import _claims

N = 10
labels = torch.zeros(N, dtype=torch.long)
predictions = torch.cat([torch.zeros(6, dtype=torch.long), torch.ones(4, dtype=torch.long)])  # 6 right, 4 wrong


def summed_counts(accelerator):
    """Reduce [correct, seen] over one epoch of the prepared loader with "sum"; no collective inside the loop."""
    hits, seen = 0, 0
    for ids in accelerator.prepare(DataLoader(torch.arange(N), batch_size=4)):
        hits += (predictions[ids] == labels[ids]).sum().item()
        seen += len(ids)
    return accelerator.reduce(torch.tensor([hits, seen], dtype=torch.float64, device=accelerator.device), "sum").tolist()


padded = summed_counts(Accelerator())  # even_batches not passed: its default
unpadded = summed_counts(Accelerator(dataloader_config=DataLoaderConfiguration(even_batches=False)))
_claims.equal(
    "summed_counts_include_the_padding_by_default",
    measured=int(padded[1]),
    control=int(unpadded[1]),  # even_batches=False: no padding, 10 seen
    expected=16,
    summed_correct_and_seen_default=padded,
    accuracy_default=padded[0] / padded[1],
    summed_correct_and_seen_even_batches_false=unpadded,
    accuracy_even_batches_false=unpadded[0] / unpadded[1],
)

# --- 3. a batch sampler without batch_size: the remainder is unknown, nothing is cut ---
class FixedPairs(Sampler):
    """Batches of 2 from a custom batch sampler with no batch_size attribute (as length bucketing has)."""

    def __iter__(self):
        return iter([[i, i + 1] for i in range(0, N, 2)])

    def __len__(self):
        return N // 2


def gathered_rows(accelerator, data_loader):
    return torch.cat([accelerator.gather_for_metrics(batch) for batch in accelerator.prepare(data_loader)]).tolist()


# even_batches given (its default value), so that a changed default cannot unpair these per-batch gathers
padding = Accelerator(dataloader_config=DataLoaderConfiguration(even_batches=True))
custom_rows = gathered_rows(padding, DataLoader(torch.arange(N), batch_sampler=FixedPairs()))
sized_rows = gathered_rows(padding, DataLoader(torch.arange(N), batch_size=2))
_claims.equal(
    "gather_for_metrics_keeps_the_padding_without_batch_size",
    measured=len(custom_rows),
    control=len(sized_rows),  # the same batches from batch_size=2: the remainder is known and cut
    expected=12,
    rows_custom_batch_sampler=custom_rows,
    rows_batch_size_2=sized_rows,
)
