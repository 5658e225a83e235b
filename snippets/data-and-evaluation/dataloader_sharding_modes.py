# How accelerator.prepare() shards a DataLoader, mode by mode, on 2 ranks. 16 samples (sample i is
# the number i), batches of 4:
#   * default (DataLoaderShard + BatchSamplerShard): whole batches are dealt out, batch i to rank i % 2;
#   * split_batches=True: every batch of 4 is cut in two, 2 samples per rank per step;
#   * dispatch_batches=True (DataLoaderDispatcher): only rank 0 reads the dataset, then broadcasts and
#     slices; the other rank reads nothing but receives the same samples as in the default mode;
#   * an IterableDataset is dispatched by default; with dispatch_batches=False it is wrapped in an
#     IterableDatasetShard, where EVERY rank reads the whole stream and keeps its slice.
# Negative controls: the same DataLoader unprepared (each rank sees all 16 samples); the default mode
# for split_batches and dispatch_batches; the dispatcher for the IterableDatasetShard.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/data-and-evaluation/dataloader_sharding_modes.py
import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration
from torch.utils.data import DataLoader, Dataset, IterableDataset

import _claims

N, BATCH = 16, 4


class CountingDataset(Dataset):
    """Map-style: sample i is the number i; counts how many samples THIS process read."""

    def __init__(self):
        self.reads = 0

    def __len__(self):
        return N

    def __getitem__(self, i):
        self.reads += 1
        return i


class CountingStream(IterableDataset):
    """Iterable-style: yields 0..15 and counts how many elements THIS process pulled from the stream."""

    def __init__(self):
        self.reads = 0

    def __iter__(self):
        for i in range(N):
            self.reads += 1
            yield i


def make_accelerator(**config):
    # Each Accelerator keeps its own DataLoaderConfiguration; the process state underneath is shared.
    return Accelerator(dataloader_config=DataLoaderConfiguration(**config))


accelerator = make_accelerator()  # the defaults: split_batches=False, dispatch_batches=None, even_batches=True
rank, world = accelerator.process_index, accelerator.num_processes


def run(loader, dataset):
    """One epoch: the samples this rank got, its batch sizes, and how many samples each rank read."""
    samples, sizes = [], []
    for batch in loader:
        samples += batch.tolist()
        sizes.append(len(batch))
    reads = accelerator.gather(torch.tensor([dataset.reads], device=accelerator.device)).tolist()
    return samples, sizes, reads, type(loader).__name__


# --- unprepared (control): every rank iterates the whole dataset ---
plain_data = CountingDataset()
plain_samples, plain_sizes, _, _ = run(DataLoader(plain_data, batch_size=BATCH), plain_data)

# --- 1. default mode: batch i goes to rank i % num_processes ---
data = CountingDataset()
shard_samples, shard_sizes, shard_reads, shard_type = run(
    accelerator.prepare(DataLoader(data, batch_size=BATCH)), data
)
batches = [list(range(start, start + BATCH)) for start in range(0, N, BATCH)]  # what the plain loader makes
dealt = [i for b, batch in enumerate(batches) if b % world == rank for i in batch]  # the rule, written out
_claims.equal(
    "default_mode_deals_whole_batches",
    measured=shard_samples,
    control=plain_samples,
    expected=dealt,
    loader=shard_type,
    batch_sizes=shard_sizes,
    unprepared_batch_sizes=plain_sizes,
)

# --- 2. split_batches=True: each batch of 4 is cut into 2 slices of 2 ---
split_data = CountingDataset()
split_samples, split_sizes, _, _ = run(
    make_accelerator(split_batches=True).prepare(DataLoader(split_data, batch_size=BATCH)), split_data
)
piece = BATCH // world
cut = [i for batch in batches for i in batch[rank * piece : (rank + 1) * piece]]  # slice r of every batch, written out
_claims.equal(
    "split_batches_cuts_each_batch",
    measured=[split_sizes, split_samples],
    control=[shard_sizes, shard_samples],  # default mode: 2 whole batches of 4 per rank
    expected=[[piece] * (N // BATCH), cut],
)

# --- 3. dispatch_batches=True: rank 0 reads, broadcasts, slices ---
dispatch_data = CountingDataset()
dispatch_samples, dispatch_sizes, dispatch_reads, dispatch_type = run(
    make_accelerator(dispatch_batches=True).prepare(DataLoader(dispatch_data, batch_size=BATCH)), dispatch_data
)
_claims.equal(
    "dispatch_batches_only_rank0_reads",
    measured=[dispatch_reads, dispatch_samples],  # samples read by rank 0, rank 1; samples this rank received
    control=[shard_reads, shard_samples],  # default mode: each rank reads its own half
    expected=[[N] + [0] * (world - 1), dealt],  # rank 0 reads all; each rank still gets "batch i to rank i % 2"
    loader=dispatch_type,
)

# --- 4. IterableDataset: dispatched by default; IterableDatasetShard with dispatch_batches=False ---
stream = CountingStream()
default_stream_loader = accelerator.prepare(DataLoader(stream, batch_size=BATCH))
default_stream_samples, _, default_stream_reads, default_stream_type = run(default_stream_loader, stream)
sharded_stream = CountingStream()
sharded_loader = make_accelerator(dispatch_batches=False).prepare(DataLoader(sharded_stream, batch_size=BATCH))
stream_samples, _, sharded_reads, sharded_type = run(sharded_loader, sharded_stream)
_claims.equal(
    "iterable_shard_reads_whole_stream",
    measured=[sharded_reads, stream_samples],  # every rank pulls all 16 elements and keeps its 8
    control=[default_stream_reads, default_stream_samples],  # the default: rank 0 reads, the others receive
    expected=[[N] * world, dealt],
    default_iterable_loader=default_stream_type,
    sharded_loader=sharded_type,
    sharded_dataset=type(sharded_loader.dataset).__name__,
)
