# What prepare() really does to a DataLoader (there is no "DataLoaderTransforms"): it returns a
# DataLoaderShard whose batch sampler hands each rank its own batches, pads the last round by
# wrapping around to the start so every rank steps the same number of times, and, when shuffling,
# makes every rank draw the SAME permutation by broadcasting rank 0's sampler generator at the start
# of each epoch (synchronize_rng_states). gather_for_metrics then drops the padding again.
# With 10 samples, batch 4 and 2 ranks the last round is padded with 6 samples wrapped around from
# the start (16 seen in all); 2 distinct samples of those end up on both ranks.
# Negative controls: an unprepared DataLoader gives every rank the whole dataset; a plain gather
# keeps the padded duplicates; sharding without the generator broadcast mixes two permutations;
# replaying the same epoch of a seedable sampler repeats its order; the same source search for the
# class prepare() really returns (DataLoaderShard) finds it.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/accelerate-api/prepare_shards_dataloader.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import pathlib

import accelerate
import torch
from accelerate import Accelerator
from accelerate.data_loader import prepare_data_loader
from torch.utils.data import DataLoader

import _claims

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
dataset = torch.arange(10)  # sample i is the number i, so every batch shows which samples it holds


def seen(loader, gather=accelerator.gather):
    """All samples every rank saw in one epoch, as one list (identical on every rank)."""
    return torch.cat([gather(batch.to(accelerator.device)) for batch in loader]).tolist()


def overlap(loader):
    """How many distinct samples both rank 0 and rank 1 saw."""
    mine = torch.zeros(len(dataset), device=accelerator.device)
    for batch in loader:
        mine[batch.to(mine.device)] = 1
    both = accelerator.gather(mine.unsqueeze(0))  # one row per rank
    return int(both.prod(dim=0).sum().item())


# --- 1. sharding: each rank its own batches ---
plain = DataLoader(dataset, batch_size=4)
prepared = accelerator.prepare(DataLoader(dataset, batch_size=4))
_claims.equal(
    "each_rank_gets_its_own_shard",
    measured=overlap(prepared),  # 2 of the 6 wrapped-around padding samples land on both ranks
    control=overlap(plain),  # every rank iterates all 10 samples
    expected=2,
    prepared_type=type(prepared).__name__,
    batches_per_rank=len(prepared),
    samples_seen_by_all_ranks=len(seen(prepared)),
    padding_samples=len(seen(prepared)) - len(dataset),  # wrapped around from the start
)

# --- 2. gather_for_metrics drops the padding that gather keeps ---
for_metrics = seen(prepared, accelerator.gather_for_metrics)
_claims.equal(
    "gather_for_metrics_drops_padding",
    measured=len(for_metrics),
    control=len(seen(prepared)),
    expected=len(dataset),
    gathered_for_metrics=for_metrics,
    gathered=seen(prepared),
)

# --- 3. shuffle=True: one permutation shared by all ranks, even if their generators differ ---
def shuffled():  # each rank seeds its own generator differently, on purpose
    return DataLoader(dataset, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(rank))


synced = accelerator.prepare(shuffled())
# The same sharding, with no broadcast of rank 0's generator (rng_types=None).
unsynced = prepare_data_loader(shuffled(), num_processes=world, process_index=rank, rng_types=None)
epoch0 = seen(synced)
_claims.equal(
    "shuffled_ranks_share_one_permutation",
    measured=len(set(epoch0)),  # one permutation, cut into shards: all 10 samples appear
    control=len(set(seen(unsynced))),  # two permutations, cut into shards: some samples never appear
    expected=len(dataset),
    epoch0=epoch0,
    epoch1=seen(synced),  # the next epoch: a new shared permutation
)

# --- 4. with a seedable sampler, set_epoch(e) picks the permutation: same epoch, same order ---
seedable = prepare_data_loader(
    DataLoader(dataset, batch_size=4, shuffle=True),
    num_processes=world, process_index=rank, use_seedable_sampler=True, data_seed=42,
)
orders = {}
for epoch in (0, 1, 0):
    seedable.set_epoch(epoch)
    orders.setdefault(epoch, []).append(seen(seedable))
_claims.at_least(
    "set_epoch_changes_the_shared_order",
    measured=sum(a != b for a, b in zip(orders[0][0], orders[1][0])),  # positions that differ, epoch 0 vs 1
    control=sum(a != b for a, b in zip(orders[0][0], orders[0][1])),  # epoch 0 replayed
    bound=1,
    epoch0=orders[0][0],
    epoch1=orders[1][0],
)

# --- 5. the handout's "DataLoaderTransforms" does not exist in accelerate or torch.utils.data ---
def occurrences(word):
    roots = [pathlib.Path(accelerate.__file__).parent, pathlib.Path(torch.utils.data.__file__).parent]
    return sum(path.read_text(encoding="utf-8").count(word) for root in roots for path in root.rglob("*.py"))


# The same search and lookup, for the handout's name and for the class prepare() really returned above:
# the control proves the search finds a loader class that does exist.
real_class = type(prepared).__name__  # "DataLoaderShard"
_claims.equal(
    "no_dataloader_transforms_api",
    measured=[occurrences("DataLoaderTransforms"), hasattr(accelerate, "DataLoaderTransforms")],
    control=[occurrences(real_class), hasattr(accelerate.data_loader, real_class)],
    expected=[0, False],
    control_name=real_class,
)
