# Resuming an IterableDataset mid-epoch with accelerator.skip_first_batches does not seek: the
# prepared loader still pulls every skipped batch out of the dataset and throws it away. A stream
# can only be read from the start, so Accelerate's skip_first_batches passes skip_batches to the
# prepared loader (DataLoaderDispatcher for an IterableDataset by default), whose __iter__ fetches
# each batch and yields it only when batch_index >= skip_batches.
# The dataset counts the samples it has produced (on every rank, then summed) at the moment the
# training loop receives its first batch.
# Negative control: the same prepared loader without skip_first_batches.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/training-mechanics/iterable_resume_reads_skipped_batches.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration
from torch.utils.data import DataLoader, IterableDataset

import _claims

BATCH, SKIP = 8, 3  # 8 samples per rank per batch; resume after 3 batches


class CountingStream(IterableDataset):
    """A stream of 128 numbered samples that records how many it has produced."""

    def __init__(self):
        self.produced = 0

    def __iter__(self):
        for i in range(128):
            self.produced += 1
            yield torch.tensor([float(i)])


def produced_at_first_batch(skip, dispatch_batches=None):
    """Samples produced by the dataset on all ranks together when the loop gets its first batch, and
    that batch's first sample number."""
    accelerator = Accelerator(dataloader_config=DataLoaderConfiguration(dispatch_batches=dispatch_batches))
    stream = CountingStream()
    loader = accelerator.prepare(DataLoader(stream, batch_size=BATCH))
    if skip:
        loader = accelerator.skip_first_batches(loader, SKIP)
    first = next(iter(loader))
    total = accelerator.reduce(torch.tensor(float(stream.produced)), "sum").item()
    return total, first[0].item(), type(loader).__name__


skipped_total, skipped_first, loader_type = produced_at_first_batch(skip=True)
plain_total, plain_first, _ = produced_at_first_batch(skip=False)
sharded_total, sharded_first, sharded_type = produced_at_first_batch(skip=True, dispatch_batches=False)

# The 3 skipped batches hold 3 x 8 samples per rank, 48 on 2 ranks; the delivered batch 16 more.
_claims.at_least(
    "skip_first_batches_reads_skipped_iterable_batches",
    measured=skipped_total,
    control=plain_total,
    bound=64,
    skipped_batches=SKIP,
    samples_per_rank_per_batch=BATCH,
    first_sample_after_skip=skipped_first,
    first_sample_without_skip=plain_first,
    loader_type=loader_type,
    produced_with_dispatch_batches_false=sharded_total,
    first_sample_with_dispatch_batches_false=sharded_first,
    loader_type_with_dispatch_batches_false=sharded_type,
)
