# A run resumed with save_state/load_state ends bit for bit where the uninterrupted run ends, if the
# checkpoint restores everything the next epoch depends on: weights, AdamW moments, the LR scheduler,
# each rank's random states (dropout masks, augmentation) and the shuffle order of the next epoch.
# The "uninterrupted" run trains 2 epochs and calls save_state after epoch 1, as a real run does
# before it crashes; each "resumed" run is a fresh model/optimizer/scheduler/DataLoader that loads
# that checkpoint and trains epoch 2.
# Each claim measures its own piece, so a failure names its cause:
#   1. the weights at the end of epoch 2      control: no load_state
#   2. the learning rates of epoch 2           control: load_state, then the scheduler reset to fresh
#   3. each rank's Python/NumPy/torch RNGs     control: weights, optimizer and scheduler restored by
#      right after the restore                 hand, random_states_<rank>.pkl not
#   4. the shuffle order of epoch 2            control: no set_epoch (the loader's epoch counter is
#                                              not in the checkpoint)
#   5. the order from seed + epoch alone       control: the default sampler (use_seedable_sampler=False)
#   6. mid-epoch: a checkpoint after batch 2 of epoch 2, resumed through skip_first_batches, ends
#      bit for bit on the uninterrupted weights; control: not skipping (those 2 batches trained twice).
#   7. the epoch after that: the prepared loader shuffles epoch 3 as the uninterrupted run does only
#      after set_epoch(2); control: the loader as skip_first_batches left it (its counter still 1).
# The scheduler is a LambdaLR (factor 0.9 ** step): computed from its own step counter, so a scheduler
# that was not restored shows. (A StepLR would not: it multiplies the optimizer's restored LR, and
# from scratch it can decay at the very same steps.)
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/training-mechanics/resume_matches_uninterrupted_run.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import contextlib
import os
import pickle
import random
import tempfile

import numpy as np
import torch
from accelerate import Accelerator, DataLoaderConfiguration
from accelerate.utils import broadcast_object_list, set_seed
from safetensors.torch import load_model
from torch.utils.data import DataLoader, TensorDataset

import _claims

data_rng = torch.Generator().manual_seed(1)
# The third tensor is the sample's index, so each run can record the order it trained in.
DATASET = TensorDataset(torch.randn(64, 8, generator=data_rng), torch.randn(64, 1, generator=data_rng), torch.arange(64))
AT_SAVE = {}  # checkpoint folder -> this rank's Python, NumPy and torch RNG states when it was written


def rng_states():
    return [pickle.dumps(random.getstate()), pickle.dumps(np.random.get_state()), torch.get_rng_state()]


def rngs_differing(states, reference):
    return sum(not torch.equal(a, b) if torch.is_tensor(a) else a != b for a, b in zip(states, reference))


def setup(seedable_sampler=True, loader_generator=False):
    """What the top of a training script does: seed, build, prepare."""
    config = DataLoaderConfiguration(use_seedable_sampler=seedable_sampler)
    accelerator = Accelerator(dataloader_config=config)  # one per run: save_state saves what it prepared
    set_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Dropout(0.5), torch.nn.Linear(32, 1)
    )  # dropout: the result depends on each rank's random state
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)  # moments: state beyond the weights
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.9**step)
    # A generator of its own keeps the DataLoader's per-iterator seed draw off the global generator
    # that dropout uses (see the mid-epoch claim). 4 batches per rank per epoch.
    own = {"generator": torch.Generator()} if loader_generator else {}
    loader = DataLoader(DATASET, batch_size=8, shuffle=True, **own)
    prepared = accelerator.prepare(model, optimizer, loader, scheduler)
    for _ in range(accelerator.process_index):  # each rank its own random stream from here on (own dropout
        random.random(), np.random.rand(), torch.rand(1)  # masks and augmentation), so the RNG files differ
    return accelerator, *prepared


def save(accelerator, checkpoint):
    accelerator.save_state(checkpoint)  # the main process writes the shared files, every rank its RNG
    AT_SAVE[checkpoint] = rng_states()
    accelerator.wait_for_everyone()  # nobody reads the checkpoint before it is complete


def train_one_epoch(accelerator, model, optimizer, loader, scheduler, save_after=None, checkpoint=None):
    """Returns the sample order and the learning rates this rank trained with."""
    model.train()
    order, rates = [], []
    for batch, (inputs, targets, index) in enumerate(loader, start=1):
        # A stand-in for augmentation that draws from Python's and NumPy's generators.
        inputs = inputs * (1 + 0.01 * (random.random() - 0.5) + 0.01 * (np.random.rand() - 0.5))
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        accelerator.backward(loss)
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        order += index.tolist()
        if batch == save_after:
            save(accelerator, checkpoint)
    return order, rates


def weights(accelerator, model):
    return torch.cat([p.detach().flatten() for p in accelerator.unwrap_model(model).parameters()])


def uninterrupted(folder, **config):
    """2 epochs, with a checkpoint after epoch 1 and another after batch 2 of epoch 2."""
    accelerator, model, optimizer, loader, scheduler = setup(**config)
    train_one_epoch(accelerator, model, optimizer, loader, scheduler)
    save(accelerator, os.path.join(folder, "epoch_1"))
    order, rates = train_one_epoch(
        accelerator, model, optimizer, loader, scheduler, 2, os.path.join(folder, "mid_epoch_2")
    )
    result = {"weights": weights(accelerator, model), "order": order, "rates": rates}
    result["epoch_3_order"] = sample_order(loader)  # the order epoch 3 would train in
    return result


def sample_order(loader):
    return [i for *_, index in loader for i in index.tolist()]


def resumed(
    checkpoint, restore="load_state", set_epoch=True, skip_batches=0, reset_scheduler=False, next_epoch=None, **config
):
    accelerator, model, optimizer, loader, scheduler = setup(**config)
    prepared_loader = loader
    fresh_scheduler = scheduler.state_dict()
    if restore == "load_state":
        accelerator.load_state(checkpoint)
    elif restore == "by_hand":  # the same files, minus random_states_<rank>.pkl
        load_model(accelerator.unwrap_model(model), os.path.join(checkpoint, "model.safetensors"))
        optimizer.load_state_dict(torch.load(os.path.join(checkpoint, "optimizer.bin")))
        scheduler.load_state_dict(torch.load(os.path.join(checkpoint, "scheduler.bin")))
    if reset_scheduler:  # control: everything restored except the scheduler's position
        scheduler.load_state_dict(fresh_scheduler)
    rngs_changed = rngs_differing(rng_states(), AT_SAVE.get(checkpoint, rng_states()))
    if set_epoch:
        loader.set_epoch(1)  # the loader's epoch counter (the shuffle seed's offset) is not saved
    if skip_batches:  # mid-epoch: the same epoch order, minus the batches already trained on
        loader = accelerator.skip_first_batches(loader, skip_batches)
    order, rates = train_one_epoch(accelerator, model, optimizer, loader, scheduler)
    result = {"weights": weights(accelerator, model), "order": order, "rates": rates, "rngs_changed": rngs_changed}
    if next_epoch is not None:  # epoch 3: back to the prepared loader, as a training loop's next epoch does
        result["counter_after_epoch_2"] = prepared_loader.iteration  # the epoch the loader will shuffle for
        if next_epoch == "set_epoch":
            prepared_loader.set_epoch(2)
        result["epoch_3_order"] = sample_order(prepared_loader)
    return result


def differ(run, reference, key):
    """Weights and rates: the largest difference; orders: how many positions differ."""
    if key.endswith("order"):
        return sum(a != b for a, b in zip(run[key], reference[key])) + abs(len(run[key]) - len(reference[key]))
    return (torch.as_tensor(run[key]) - torch.as_tensor(reference[key])).abs().max().item()


# One checkpoint folder that both ranks see (same filesystem): rank 0 creates it, broadcasts the path.
is_main = Accelerator().is_main_process
with tempfile.TemporaryDirectory() if is_main else contextlib.nullcontext() as local:
    shared = broadcast_object_list([local])[0]  # rank 1 receives rank 0's path
    seedable, default, with_generator = (os.path.join(shared, name) for name in ("seedable", "default", "generator"))

    reference = uninterrupted(seedable)
    epoch_1 = os.path.join(seedable, "epoch_1")
    checkpoint_files = sorted(os.listdir(epoch_1))
    full = resumed(epoch_1)
    no_load = resumed(epoch_1, restore=None)
    scheduler_reset = resumed(epoch_1, reset_scheduler=True)
    by_hand = resumed(epoch_1, restore="by_hand")
    no_set_epoch = resumed(epoch_1, set_epoch=False)

    default_reference = uninterrupted(default, seedable_sampler=False)
    default_epoch_1 = os.path.join(default, "epoch_1")
    default_fresh = resumed(default_epoch_1, restore=None, seedable_sampler=False)
    default_full = resumed(default_epoch_1, seedable_sampler=False)

    # Mid-epoch: resume from the checkpoint taken after batch 2 of epoch 2 and skip those 2 batches.
    generator_reference = uninterrupted(with_generator, loader_generator=True)
    mid = os.path.join(with_generator, "mid_epoch_2")
    mid_skipped = resumed(mid, skip_batches=2, loader_generator=True, next_epoch="set_epoch")
    mid_skipped_as_is = resumed(mid, skip_batches=2, loader_generator=True, next_epoch="as_is")
    mid_not_skipped = resumed(mid, loader_generator=True)
    mid_global_draw = resumed(os.path.join(seedable, "mid_epoch_2"), skip_batches=2)
    Accelerator().wait_for_everyone()  # rank 0 deletes the folder only after every rank has read it

_claims.equal(
    "resumed_run_matches_uninterrupted",
    measured=differ(full, reference, "weights"),
    control=differ(no_load, reference, "weights"),
    expected=0.0,
    checkpoint_files=checkpoint_files,
)
_claims.equal(
    "load_state_restores_lr_scheduler",
    measured=differ(full, reference, "rates"),  # the LR of each of epoch 2's 4 steps
    control=differ(scheduler_reset, reference, "rates"),
    expected=0.0,
    epoch_2_rates=reference["rates"],
    rates_with_scheduler_reset=scheduler_reset["rates"],
    weights_with_scheduler_reset=differ(scheduler_reset, reference, "weights"),
)
_claims.equal(
    "load_state_restores_each_ranks_random_states",
    measured=full["rngs_changed"],  # of Python's random, NumPy's global and torch's CPU generator
    control=by_hand["rngs_changed"],
    expected=0,
    weights_without_random_states=differ(by_hand, reference, "weights"),
)
_claims.equal(
    "resume_needs_set_epoch",
    measured=differ(full, reference, "order"),  # positions of epoch 2's 32 samples on this rank
    control=differ(no_set_epoch, reference, "order"),
    expected=0,
    weights_without_set_epoch=differ(no_set_epoch, reference, "weights"),
)
_claims.equal(
    "seedable_sampler_order_is_seed_and_epoch",
    measured=differ(no_load, reference, "order"),  # no checkpoint at all: set_seed(0) + set_epoch(1)
    control=differ(default_fresh, default_reference, "order"),
    expected=0,
    default_sampler_after_load_state_order=differ(default_full, default_reference, "order"),
    default_sampler_after_load_state_weights=differ(default_full, default_reference, "weights"),
)
_claims.equal(
    "mid_epoch_resume_skips_trained_batches",
    measured=differ(mid_skipped, generator_reference, "weights"),
    control=differ(mid_not_skipped, generator_reference, "weights"),
    expected=0.0,
    without_loader_generator=differ(mid_global_draw, reference, "weights"),  # the seed draw shifts dropout
)
_claims.equal(
    "next_epoch_after_skip_needs_set_epoch",
    measured=differ(mid_skipped, generator_reference, "epoch_3_order"),  # set_epoch(2) on the prepared loader
    control=differ(mid_skipped_as_is, generator_reference, "epoch_3_order"),  # the loader as skip_first_batches left it
    expected=0,
    prepared_loader_counter_after_the_skipped_epoch=mid_skipped_as_is["counter_after_epoch_2"],
    positions_differing_from_epoch_2_order=differ({"order": mid_skipped_as_is["epoch_3_order"]}, generator_reference, "order"),
)
