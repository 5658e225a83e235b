# A run resumed with save_state/load_state ends bit for bit where the uninterrupted run ends, if the
# checkpoint restores everything the next epoch depends on: weights, AdamW moments, the LR scheduler,
# each rank's random state (dropout masks) and the shuffle order of the next epoch.
# The "uninterrupted" run trains 2 epochs and calls save_state after epoch 1, as a real run does
# before it crashes; each "resumed" run is a fresh model/optimizer/DataLoader that loads that
# checkpoint and trains epoch 2.
# Negative controls, one per piece of state: no load_state (fresh weights); weights, optimizer and
# scheduler restored by hand but not the random states; no set_epoch (the loader's epoch counter is
# not in the checkpoint); the default sampler instead of use_seedable_sampler=True.
# Mid-epoch: a checkpoint after batch 2 of epoch 2, resumed through skip_first_batches, also ends
# bit for bit on the uninterrupted weights; control: not skipping (those 2 batches trained twice).
#
#   accelerate launch --multi_gpu --num_processes 2 snippets/resume_matches_uninterrupted_run.py
#   (on a CPU-only machine export ACCELERATE_USE_CPU=true first)
import contextlib
import os
import tempfile

import torch
from accelerate import Accelerator, DataLoaderConfiguration
from accelerate.utils import broadcast_object_list, set_seed
from safetensors.torch import load_model
from torch.utils.data import DataLoader, TensorDataset

import _claims

data_rng = torch.Generator().manual_seed(1)
DATASET = TensorDataset(torch.randn(64, 8, generator=data_rng), torch.randn(64, 1, generator=data_rng))


def setup(seedable_sampler=True, loader_generator=False):
    """What the top of a training script does: seed, build, prepare."""
    config = DataLoaderConfiguration(use_seedable_sampler=seedable_sampler)
    accelerator = Accelerator(dataloader_config=config)  # one per run: save_state saves what it prepared
    set_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Dropout(0.5), torch.nn.Linear(32, 1)
    )  # dropout: the result depends on each rank's random state
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)  # moments: state beyond the weights
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.5)
    # A generator of its own keeps the DataLoader's per-iterator seed draw off the global generator
    # that dropout uses (see the mid-epoch claim). 4 batches per rank per epoch.
    own = {"generator": torch.Generator()} if loader_generator else {}
    loader = DataLoader(DATASET, batch_size=8, shuffle=True, **own)
    return accelerator, *accelerator.prepare(model, optimizer, loader, scheduler)


def save(accelerator, checkpoint):
    accelerator.save_state(checkpoint)  # the main process writes the shared files, every rank its RNG
    accelerator.wait_for_everyone()  # nobody reads the checkpoint before it is complete


def train_one_epoch(accelerator, model, optimizer, loader, scheduler, save_after=None, checkpoint=None):
    model.train()
    for batch, (inputs, targets) in enumerate(loader, start=1):
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        accelerator.backward(loss)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        if batch == save_after:
            save(accelerator, checkpoint)


def weights(accelerator, model):
    return torch.cat([p.detach().flatten() for p in accelerator.unwrap_model(model).parameters()])


def uninterrupted(folder, **config):
    """2 epochs, with a checkpoint after epoch 1 and another after batch 2 of epoch 2."""
    accelerator, model, optimizer, loader, scheduler = setup(**config)
    train_one_epoch(accelerator, model, optimizer, loader, scheduler)
    save(accelerator, os.path.join(folder, "epoch_1"))
    train_one_epoch(accelerator, model, optimizer, loader, scheduler, 2, os.path.join(folder, "mid_epoch_2"))
    return weights(accelerator, model)


def resumed(checkpoint, restore="load_state", set_epoch=True, skip_batches=0, **config):
    accelerator, model, optimizer, loader, scheduler = setup(**config)
    if restore == "load_state":
        accelerator.load_state(checkpoint)
    elif restore == "by_hand":  # the same files, minus random_states_<rank>.pkl
        load_model(accelerator.unwrap_model(model), os.path.join(checkpoint, "model.safetensors"))
        optimizer.load_state_dict(torch.load(os.path.join(checkpoint, "optimizer.bin")))
        scheduler.load_state_dict(torch.load(os.path.join(checkpoint, "scheduler.bin")))
    if set_epoch:
        loader.set_epoch(1)  # the loader's epoch counter (the shuffle seed's offset) is not saved
    if skip_batches:  # mid-epoch: the same epoch order, minus the batches already trained on
        loader = accelerator.skip_first_batches(loader, skip_batches)
    train_one_epoch(accelerator, model, optimizer, loader, scheduler)
    return weights(accelerator, model)


def max_diff(a, b):
    return (a - b).abs().max().item()


# One checkpoint folder that both ranks see (same filesystem): rank 0 creates it, broadcasts the path.
is_main = Accelerator().is_main_process
with tempfile.TemporaryDirectory() if is_main else contextlib.nullcontext() as local:
    shared = broadcast_object_list([local])[0]  # rank 1 receives rank 0's path
    seedable, default, with_generator = (os.path.join(shared, name) for name in ("seedable", "default", "generator"))

    reference = uninterrupted(seedable)
    epoch_1 = os.path.join(seedable, "epoch_1")
    checkpoint_files = sorted(os.listdir(epoch_1))
    full = max_diff(resumed(epoch_1), reference)
    no_load = max_diff(resumed(epoch_1, restore=None), reference)
    by_hand = max_diff(resumed(epoch_1, restore="by_hand"), reference)
    no_set_epoch = max_diff(resumed(epoch_1, set_epoch=False), reference)

    default_reference = uninterrupted(default, seedable_sampler=False)
    default_resumed = max_diff(resumed(os.path.join(default, "epoch_1"), seedable_sampler=False), default_reference)

    # Mid-epoch: resume from the checkpoint taken after batch 2 of epoch 2 and skip those 2 batches.
    generator_reference = uninterrupted(with_generator, loader_generator=True)
    mid = os.path.join(with_generator, "mid_epoch_2")
    mid_skipped = max_diff(resumed(mid, skip_batches=2, loader_generator=True), generator_reference)
    mid_not_skipped = max_diff(resumed(mid, loader_generator=True), generator_reference)
    mid_global_draw = max_diff(resumed(os.path.join(seedable, "mid_epoch_2"), skip_batches=2), reference)
    Accelerator().wait_for_everyone()  # rank 0 deletes the folder only after every rank has read it

_claims.equal(
    "resumed_run_matches_uninterrupted",
    measured=full,
    control=no_load,
    expected=0.0,
    checkpoint_files=checkpoint_files,
)
_claims.equal("resume_needs_random_states", measured=full, control=by_hand, expected=0.0)
_claims.equal("resume_needs_set_epoch", measured=full, control=no_set_epoch, expected=0.0)
_claims.equal("resume_needs_seedable_sampler", measured=full, control=default_resumed, expected=0.0)
_claims.equal(
    "mid_epoch_resume_skips_trained_batches",
    measured=mid_skipped,
    control=mid_not_skipped,
    expected=0.0,
    without_loader_generator=mid_global_draw,  # the iterator's seed draw shifts the dropout masks
)
