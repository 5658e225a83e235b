# How a prepared learning-rate scheduler counts on 2 ranks. AcceleratedScheduler.step() (in
# accelerate/scheduler.py) calls the wrapped scheduler's step() num_processes times per call, because
# with split_batches=False each process consumes its own batch: one optimizer step on 2 ranks uses as
# many samples as 2 steps of the single-process script the schedule was written for.
#   * 3 calls of scheduler.step() advance a LambdaLR by 6 on 2 ranks; an unprepared one by 3.
#   * split_batches=True, or Accelerator(step_scheduler_with_optimizer=False), advances it by 3.
#   * Consequence: a linear decay sized for 10 OPTIMIZER steps reaches 0 after 5 optimizer steps on 2
#     ranks; sized as 10 x num_processes (the single-process batch count) it lasts the 10 steps.
#   * One rule for both split_batches settings: size the schedule from len(train_dataloader) taken BEFORE
#     prepare(); over one epoch of the prepared loader it then reaches 0 exactly on the last optimizer step.
#   * Gradient accumulation does not make it faster: inside accelerator.accumulate() the prepared scheduler
#     does not step on the micro-batches that do not synchronise (6 micro-batches, 3 per window: 2 x 2).
#   * An epoch with accumulation has ceil(len / k) optimizer steps: accumulate() also synchronises on the
#     last batch of the prepared DataLoader (3 epochs of 5 batches, k=2: 9 steps, not 5 * 3 // 2 = 7).
# Negative controls: the same loop with an unprepared scheduler; the default Accelerator; the schedule
# sized in optimizer steps; the accumulation loop without accumulate() (sync_gradients always True); the
# same batches from a list (no end-of-epoch signal).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/training-mechanics/scheduler_steps_per_process.py
import contextlib

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset
from accelerate.utils import DataLoaderConfiguration
from torch.optim.lr_scheduler import LambdaLR

import _claims

CALLS, TOTAL = 3, 10


def linear_decay(total):
    return lambda step: max(0.0, 1.0 - step / total)  # lr factor: 1 at step 0, 0 at step `total`


def run(accelerator=None, total=TOTAL, calls=CALLS):
    """`calls` x (optimizer.step(); scheduler.step()). Returns the wrapped scheduler's count and lr."""
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = LambdaLR(optimizer, linear_decay(total))
    if accelerator is not None:
        model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    lrs = []
    for _ in range(calls):
        model(torch.ones(1, 2)).sum().backward()  # any gradient: the optimizer must really step
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        lrs.append(round(scheduler.get_last_lr()[0], 6))
    inner = scheduler.scheduler if accelerator is not None else scheduler  # the wrapped torch scheduler
    return inner.last_epoch, lrs


accelerator = Accelerator()  # split_batches=False, step_scheduler_with_optimizer=True: the defaults
prepared_count, prepared_lrs = run(accelerator)
plain_count, plain_lrs = run(None)  # plain PyTorch: one scheduler step per call
_claims.equal(
    "prepared_scheduler_steps_num_processes_times",
    measured=prepared_count,
    control=plain_count,
    expected=CALLS * accelerator.num_processes,
    lr_after_each_call_prepared=prepared_lrs,
    lr_after_each_call_plain=plain_lrs,
)

split_count, split_lrs = run(Accelerator(dataloader_config=DataLoaderConfiguration(split_batches=True)))
_claims.equal(
    "split_batches_steps_once",
    measured=split_count,
    control=prepared_count,  # the default, split_batches=False
    expected=CALLS,
    lr_after_each_call=split_lrs,
)

unlinked_count, _ = run(Accelerator(step_scheduler_with_optimizer=False))
_claims.equal(
    "step_scheduler_with_optimizer_false_steps_once",
    measured=unlinked_count,
    control=prepared_count,
    expected=CALLS,
)

# A linear decay meant to last TOTAL optimizer steps: how many optimizer steps until the lr is 0?
def steps_until_zero(total):
    _, lrs = run(accelerator, total=total, calls=TOTAL + 1)
    return next((i + 1 for i, lr in enumerate(lrs) if lr == 0.0), None)


_claims.equal(
    "schedule_sized_in_optimizer_steps_ends_early",
    measured=steps_until_zero(TOTAL * accelerator.num_processes),  # sized in single-process batches
    control=steps_until_zero(TOTAL),  # sized in optimizer steps: ends after TOTAL / num_processes
    expected=TOTAL,
)


# One epoch of a real DataLoader (40 samples, batch 4: 10 batches before prepare), the schedule sized from
# len(loader) before prepare or from len(prepared loader): on which optimizer step does the lr reach 0?
def epoch_until_zero(accelerator, size_from_prepared):
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    loader = DataLoader(TensorDataset(torch.ones(40, 2)), batch_size=4)
    before_prepare = len(loader)
    prepared_model, optimizer, prepared_loader = accelerator.prepare(model, optimizer, loader)
    total = len(prepared_loader) if size_from_prepared else before_prepare
    scheduler = accelerator.prepare(LambdaLR(optimizer, linear_decay(total)))
    zero_at = None
    for step, (x,) in enumerate(prepared_loader, start=1):
        prepared_model(x).sum().backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        if zero_at is None and scheduler.get_last_lr()[0] == 0.0:
            zero_at = step
    return zero_at, len(prepared_loader)


by_split = [accelerator, Accelerator(dataloader_config=DataLoaderConfiguration(split_batches=True))]  # False, True
sized_before = [epoch_until_zero(one, size_from_prepared=False) for one in by_split]
sized_prepared = [epoch_until_zero(one, size_from_prepared=True) for one in by_split]
_claims.equal(
    "schedule_sized_before_prepare_ends_on_last_step",
    measured=[zero_at for zero_at, _ in sized_before],  # split_batches False, True
    control=[zero_at for zero_at, _ in sized_prepared],  # control: sized from len(prepared loader)
    expected=[5, 10],  # the optimizer steps of one epoch: 10 batches / 2 ranks, and 10 split batches
    prepared_loader_lengths=[length for _, length in sized_before],
)


# Gradient accumulation does not speed the schedule up: inside accelerator.accumulate() the prepared
# scheduler does not step while sync_gradients is False, so over 6 micro-batches with
# gradient_accumulation_steps=3 it advances only on the 2 synchronising ones (each time by num_processes).
ACCUMULATION, MICRO_BATCHES = 3, 6


def scheduler_count_per_micro_batch(use_accumulate):
    """The wrapped scheduler's last_epoch after each of MICRO_BATCHES micro-batches of the Accelerate recipe."""
    accumulating = Accelerator(gradient_accumulation_steps=ACCUMULATION)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    model, optimizer, scheduler = accumulating.prepare(model, optimizer, LambdaLR(optimizer, linear_decay(100)))
    counts = []
    for _ in range(MICRO_BATCHES):
        with accumulating.accumulate(model) if use_accumulate else contextlib.nullcontext():
            accumulating.backward(model(torch.ones(1, 2)).sum())
            optimizer.step()
            scheduler.step()  # called on every micro-batch, as the Accelerate examples do
            optimizer.zero_grad()
        counts.append(scheduler.scheduler.last_epoch)
    return counts


every_micro_batch = scheduler_count_per_micro_batch(use_accumulate=False)  # control first: sync_gradients True
with_accumulate = scheduler_count_per_micro_batch(use_accumulate=True)
_claims.equal(
    "accumulation_does_not_speed_up_schedule",
    measured=with_accumulate[-1],
    control=every_micro_batch[-1],  # control: the same loop without accumulate(), sync_gradients always True
    expected=MICRO_BATCHES // ACCUMULATION * accelerator.num_processes,
    count_after_each_micro_batch=with_accumulate,
    count_after_each_micro_batch_without_accumulate=every_micro_batch,
)


# How many optimizer steps does an epoch have with accumulation? accumulate() also synchronises on the last
# batch of the prepared DataLoader (GradientState.end_of_dataloader), so an epoch of 5 batches per rank with
# gradient_accumulation_steps=2 has ceil(5 / 2) = 3 steps, not 5 // 2: over 3 epochs 9, not 7. A schedule
# sized with `//` ends early. Control: the same batches from a list, so accumulate() cannot see the epoch end.
EPOCHS, K = 3, 2


def epochs_with_accumulation(from_list, prepared_schedule=False, ceil_sized=False):
    acc = Accelerator(gradient_accumulation_steps=K)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    loader = DataLoader(TensorDataset(torch.ones(40, 2)), batch_size=4)  # 10 batches, 5 per rank
    before_prepare = len(loader)
    model, optimizer, prepared_loader = acc.prepare(model, optimizer, loader)
    batches = list(prepared_loader) if from_list else prepared_loader  # control: a list has no end signal
    floor_sized = len(prepared_loader) * EPOCHS // K  # the optimizer-step count the `//` formula assumes
    if ceil_sized:  # ceil(len(prepared) / K) optimizer steps per epoch
        floor_sized = -(-len(prepared_loader) // K) * EPOCHS
    if prepared_schedule:  # sized in single-process batches, stepped on every micro-batch as the examples do
        floor_sized = before_prepare * EPOCHS // K
        if ceil_sized:  # the prepared scheduler steps num_processes times per optimizer step
            floor_sized = -(-len(prepared_loader) // K) * EPOCHS * acc.num_processes
        scheduler = acc.prepare(LambdaLR(optimizer, linear_decay(floor_sized)))
    else:  # not prepared: stepped on sync_gradients only
        scheduler = LambdaLR(optimizer, linear_decay(floor_sized))
    steps, zero_at, synced = 0, None, []
    for epoch in range(EPOCHS):
        for micro_batch, (x,) in enumerate(batches, start=1):
            with acc.accumulate(model):
                acc.backward(model(x).sum())
                optimizer.step()
                if prepared_schedule:
                    scheduler.step()
                optimizer.zero_grad()
                if acc.sync_gradients:
                    synced.append((epoch + 1, micro_batch))
                    if not prepared_schedule:
                        scheduler.step()
                    steps += 1
                    if zero_at is None and scheduler.get_last_lr()[0] == 0.0:
                        zero_at = steps
    return steps, zero_at, len(prepared_loader), floor_sized, synced


steps_per_run, floor_zero_at, prepared_length, floor_sized, synced = epochs_with_accumulation(from_list=False)
steps_without_end_signal, _, _, _, synced_from_list = epochs_with_accumulation(from_list=True)
_, prepared_zero_at, _, prepared_sized, _ = epochs_with_accumulation(from_list=False, prepared_schedule=True)
_, ceil_zero_at, _, ceil_sized, _ = epochs_with_accumulation(from_list=False, ceil_sized=True)
_, prepared_ceil_zero_at, _, prepared_ceil_sized, _ = epochs_with_accumulation(
    from_list=False, prepared_schedule=True, ceil_sized=True
)
_claims.equal(
    "epoch_steps_round_up_with_accumulation",
    measured=steps_per_run,
    control=steps_without_end_signal,  # control: the same batches from a list, no end-of-epoch sync
    expected=EPOCHS * -(-prepared_length // K),  # 3 x ceil(5 / 2)
    prepared_loader_length=prepared_length,
    synchronising_epoch_and_micro_batch=synced,
    synchronising_epoch_and_micro_batch_from_list=synced_from_list,
    floor_formula_steps=floor_sized,
    unprepared_schedule_sized_by_floor_formula_reaches_0_at_step=floor_zero_at,
    prepared_schedule_sized_before_prepare=prepared_sized,  # 10 batches x 3 epochs // 2
    prepared_schedule_reaches_0_at_step=prepared_zero_at,
    unprepared_schedule_sized_by_ceil=ceil_sized,  # ceil(5 / 2) x 3 epochs
    unprepared_schedule_sized_by_ceil_reaches_0_at_step=ceil_zero_at,
    prepared_schedule_sized_by_ceil_times_num_processes=prepared_ceil_sized,  # ceil(5 / 2) x 3 x 2
    prepared_schedule_sized_by_ceil_reaches_0_at_step=prepared_ceil_zero_at,
)
