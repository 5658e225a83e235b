# What accelerate.utils.set_seed makes reproducible, and what it leaves alone.
#   1. The same seed gives bit-identical losses: we run the SAME training function twice in this
#      process, each time after set_seed (weights, dropout, shuffling, NumPy noise all replay).
#      Negative control: another seed gives other losses.
#   2. set_seed(s, device_specific=True) seeds rank r with s + r, so ranks draw different numbers
#      (e.g. for per-rank augmentation). Negative control: without it both ranks draw the same.
#   3. set_seed seeds NumPy's legacy global generator: two np.random.random() draws after set_seed(42)
#      are equal. Negative control: another seed before the second draw.
#   3b. A NumPy Generator needs its own seed: np.random.default_rng(42) replays; default_rng() without a
#      seed takes OS entropy, which no global seed reaches (a NumPy fact: set_seed plays no part).
#      Negative control: the same two draws from default_rng() without a seed.
#   4. set_seed seeds Python's own `random` module too. Negative control: another seed before the
#      second draw.
#   5. With DataLoaderConfiguration(use_seedable_sampler=True) (transformers' Trainer's default) Accelerate
#      does not synchronise the shuffling generator: each rank seeds its SeedableRandomSampler from its own
#      torch.initial_seed(), so set_seed(42, device_specific=True) before prepare gives the ranks different
#      permutations, and one epoch of 16 samples covers fewer than 16 distinct samples.
#      Negative control: the same with Accelerate's default (no dataloader_config given: rank 0's generator
#      state broadcast, 16 of 16).
#   (Two separate launches giving the same losses is checked by hand on the page, not here.)
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/accelerate-api/set_seed_reproducible_runs.py
import random

import numpy as np
import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, set_seed
from torch.utils.data import DataLoader, TensorDataset

import _claims

accelerator = Accelerator()
fixed = torch.Generator().manual_seed(1234)  # the data itself does not depend on the seed under test
dataset = TensorDataset(torch.randn(64, 8, generator=fixed), torch.randn(64, 1, generator=fixed))


def train(seed):
    """Every source of randomness a small run has: init, dropout, shuffling, NumPy augmentation."""
    set_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Dropout(0.5), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    loader = DataLoader(dataset, batch_size=8, shuffle=True)
    model, optimizer, loader = accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.05), loader)
    losses = []
    for x, y in loader:
        noise = torch.from_numpy(np.random.normal(0, 0.1, x.shape)).float().to(x.device)
        loss = torch.nn.functional.mse_loss(model(x + noise), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return torch.tensor(losses)


first, again, other = train(42), train(42), train(43)
_claims.equal(
    "same_seed_same_losses",
    measured=(first - again).abs().max().item(),
    control=(first - other).abs().max().item(),
    expected=0.0,
    steps=len(first),
    first_losses=first[:3],
)


def spread_across_ranks(tensor):
    copies = [torch.empty_like(tensor) for _ in range(accelerator.num_processes)]
    dist.all_gather(copies, tensor)
    return max((c - copies[0]).abs().max().item() for c in copies)


set_seed(42, device_specific=True)  # seed 42 + process_index
per_rank_seed = torch.initial_seed()
per_rank_draw = spread_across_ranks(torch.rand(4, device=accelerator.device))
set_seed(42)
shared_draw = spread_across_ranks(torch.rand(4, device=accelerator.device))
_claims.at_least(
    "device_specific_gives_each_rank_its_own_stream",
    measured=per_rank_draw,
    control=shared_draw,
    bound=1e-3,
    torch_initial_seed_this_rank=per_rank_seed,
)


def draw_twice(draw, second_seed=42):
    set_seed(42)
    a = draw()
    set_seed(second_seed)
    return abs(a - draw())


_claims.equal(
    "set_seed_seeds_numpy_global",
    measured=draw_twice(np.random.random),  # replayed only if set_seed calls np.random.seed
    control=draw_twice(np.random.random, second_seed=43),
    expected=0.0,
)
_claims.equal(
    "default_rng_needs_its_own_seed",
    measured=abs(np.random.default_rng(42).random() - np.random.default_rng(42).random()),
    control=draw_twice(lambda: np.random.default_rng().random()),  # no seed: OS entropy, set_seed or not
    expected=0.0,
)

_claims.equal(
    "set_seed_seeds_python_random",
    measured=draw_twice(random.random),  # replayed only if set_seed calls random.seed
    control=draw_twice(random.random, second_seed=43),
    expected=0.0,
)


# --- 5. use_seedable_sampler=True with device_specific seeds: the ranks shuffle apart ---
def distinct_samples_in_one_epoch(use_seedable_sampler):
    """Distinct samples both ranks see in one shuffled epoch of 16, after set_seed(42, device_specific=True)."""
    if use_seedable_sampler is None:
        config = Accelerator()  # the argument omitted: Accelerate's own default sampler
    else:
        config = Accelerator(dataloader_config=DataLoaderConfiguration(use_seedable_sampler=use_seedable_sampler))
    set_seed(42, device_specific=True)  # rank r: torch seed 42 + r, before prepare
    loader = config.prepare(DataLoader(torch.arange(16), batch_size=2, shuffle=True))
    seen = config.gather(torch.cat(list(loader)))
    return len(set(seen.tolist())), seen.tolist()


seedable_distinct, seedable_seen = distinct_samples_in_one_epoch(True)
default_distinct, default_seen = distinct_samples_in_one_epoch(None)
_claims.at_most(
    "seedable_sampler_follows_each_ranks_seed",
    measured=seedable_distinct,
    control=default_distinct,  # Accelerator() with no dataloader_config: rank 0's generator state is broadcast
    tolerance=15,
    samples_seen_seedable=seedable_seen,
    samples_seen_default=default_seen,
)
