# Gradient accumulation with Accelerate: with gradient_accumulation_steps=4 and
# `with accelerator.accumulate(model):`, 4 micro-batches of 8 samples per rank (2 ranks) make the
# same optimizer steps as one process on batches of 64, DDP all-reduces once per 4 micro-batches,
# and a prepared LR scheduler steps only on the 4th micro-batch (num_processes times, here 2).
# The end of a prepared DataLoader closes a short window: 6 micro-batches per rank step after
# micro-batch 4 and after micro-batch 6, and the short window's loss is still divided by 4.
# GradientAccumulationPlugin's adjust_scheduler is documented as True by default, but in effect it
# is False: KwargsHandler.to_kwargs drops fields left at their default and GradientState reads
# .get("adjust_scheduler", False).
# With a BatchNorm layer the accumulated run does NOT take the big-batch step: in training mode each
# micro-batch of 8 is normalised with its own mean and variance, not those of the 64 samples.
# Negative controls: loss.backward() instead of accelerator.backward(loss) (the loss is not divided
# by 4, so the accumulated gradient is 4 times too large); the same loop without accumulate() (an
# all-reduce, an optimizer step and a scheduler step after every micro-batch); a plain DataLoader
# (no end-of-data signal, so the last 2 micro-batches never step); each micro-batch divided by the
# length of its own window instead of by 4; the plugin's own field, read before to_kwargs drops it;
# the BatchNorm model in eval mode (normalising with running statistics, whatever the micro-batch).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/training-mechanics/accumulate_matches_big_batch.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import contextlib
import copy

import torch
from accelerate import Accelerator
from accelerate.utils import GradientAccumulationPlugin, set_seed
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.utils.data import DataLoader, TensorDataset

import _claims

ACCUMULATION, MICRO_BATCH, LR = 4, 8, 0.1
TOLERANCE = 1e-6  # float rounding is ~1e-8; a 4x gradient moves the weights by ~1e-1

accelerator = Accelerator(gradient_accumulation_steps=ACCUMULATION)
set_seed(0)
inputs, targets = torch.randn(128, 8), torch.randn(128, 1)
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))


def flat_weights(module):
    return torch.cat([p.detach().flatten() for p in module.parameters()])


def train(use_accumulate=True, divide_loss=True):
    """One epoch: 128 samples, 8 micro-batches of 8 per rank. Returns weights, all-reduces, steps and
    the scheduler's step counter after each micro-batch."""
    net = copy.deepcopy(model)  # every run starts from the same weights
    loader = DataLoader(TensorDataset(inputs, targets), batch_size=MICRO_BATCH)  # not shuffled: see below
    optimizer = torch.optim.SGD(net.parameters(), lr=LR)
    # A constant schedule (factor 1): the LR stays 0.1, and last_epoch counts the scheduler's real steps.
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    net, optimizer, loader, scheduler = accelerator.prepare(net, optimizer, loader, scheduler)
    allreduces, scheduler_steps = [], []

    def counting_hook(state, bucket):  # called once per gradient bucket that DDP all-reduces
        allreduces.append(bucket.index())
        return allreduce_hook(state, bucket)  # torch's reference hook: divide by world size, all-reduce

    net.register_comm_hook(state=None, hook=counting_hook)
    steps = 0
    for x, y in loader:
        with accelerator.accumulate(net) if use_accumulate else contextlib.nullcontext():
            loss = torch.nn.functional.mse_loss(net(x), y)
            if divide_loss:
                accelerator.backward(loss)  # divides the loss by gradient_accumulation_steps
            else:
                loss.backward()
            steps += accelerator.sync_gradients  # AcceleratedOptimizer.step acts only when this is True
            optimizer.step()
            scheduler.step()  # AcceleratedScheduler.step: returns early unless sync_gradients
            optimizer.zero_grad()
        scheduler_steps.append(scheduler.scheduler.last_epoch)
    return flat_weights(accelerator.unwrap_model(net)), len(allreduces), steps, scheduler_steps, scheduler


# Reference: ONE process, plain SGD on batches of 64. The prepared loader deals batch i to rank i % 2,
# so the 4 micro-batches of both ranks in one accumulation window are 64 consecutive samples.
reference = copy.deepcopy(model)
sgd = torch.optim.SGD(reference.parameters(), lr=LR)
for window in range(128 // 64):
    rows = slice(window * 64, (window + 1) * 64)
    torch.nn.functional.mse_loss(reference(inputs[rows]), targets[rows]).backward()
    sgd.step()
    sgd.zero_grad()

accumulated, allreduces, steps, scheduler_steps, scheduler = train()
undivided = train(divide_loss=False)[0]
every_batch, allreduces_without, steps_without, scheduler_steps_without, _ = train(use_accumulate=False)

_claims.at_most(
    "accumulated_steps_match_big_batch",
    measured=(accumulated - flat_weights(reference)).abs().max().item(),
    control=(undivided - flat_weights(reference)).abs().max().item(),
    tolerance=TOLERANCE,
    micro_batches_per_rank=len(inputs) // MICRO_BATCH // accelerator.num_processes,
    optimizer_steps=steps,
    reference_batch=64,
)
_claims.equal(
    "one_allreduce_per_window",
    measured=allreduces,
    control=allreduces_without,
    expected=2,  # 8 micro-batches per rank / 4 per window, one gradient bucket each
    optimizer_steps_with_accumulate=steps,
    optimizer_steps_without=steps_without,
    max_weight_diff_without_accumulate=(every_batch - flat_weights(reference)).abs().max().item(),
)
# The wrapped scheduler's last_epoch after each micro-batch: it moves only on the 4th, and then by
# num_processes (2), because each rank's step counts as one single-process batch per rank.
_claims.equal(
    "scheduler_steps_only_when_optimizer_steps",
    measured=scheduler_steps,
    control=scheduler_steps_without,
    expected=[0, 0, 0, 2, 2, 2, 2, 4],
    scheduler_step_count=scheduler.scheduler._step_count,  # 1 at creation + 4 real steps, no extra bumps
)

# adjust_scheduler: the plugin's field says True, GradientState reads what to_kwargs kept.
_claims.equal(
    "adjust_scheduler_is_off_in_effect",
    measured=accelerator.gradient_state.adjust_scheduler,
    control=GradientAccumulationPlugin(num_steps=ACCUMULATION).to_dict().get("adjust_scheduler", False),
    expected=False,
    plugin_kwargs=accelerator.gradient_state.plugin_kwargs,
    explicit_true_kept=GradientAccumulationPlugin(num_steps=ACCUMULATION, adjust_scheduler=True).to_kwargs(),
)


# --- A short last window: 96 samples, so 6 micro-batches per rank with k = 4 ---
def short_epoch(prepared=True, divide_by_window=False):
    """Micro-batches after which the weights changed (the optimizer really stepped), and the weights."""
    net = copy.deepcopy(model)
    optimizer = torch.optim.SGD(net.parameters(), lr=LR)
    if prepared:  # batch i to rank i % 2: 12 batches, 6 per rank, the prepared loader flags the last one
        loader = DataLoader(TensorDataset(inputs[:96], targets[:96]), batch_size=MICRO_BATCH)
        net, optimizer, loader = accelerator.prepare(net, optimizer, loader)
    else:  # control: 6 micro-batches per rank from a plain DataLoader, which tells Accelerate nothing
        loader = DataLoader(TensorDataset(inputs[:48], targets[:48]), batch_size=MICRO_BATCH)
        net, optimizer = accelerator.prepare(net, optimizer)
    stepped = []
    for micro_batch, (x, y) in enumerate(loader, start=1):
        before = flat_weights(accelerator.unwrap_model(net))
        with accelerator.accumulate(net):
            loss = torch.nn.functional.mse_loss(net(x), y)
            if divide_by_window:  # control: divide by the window's real length (4, then 2), not by 4
                loss = loss * ACCUMULATION / (ACCUMULATION if micro_batch <= ACCUMULATION else 2)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        if not torch.equal(before, flat_weights(accelerator.unwrap_model(net))):
            stepped.append(micro_batch)
    return stepped, flat_weights(accelerator.unwrap_model(net))


# One process: a step on samples 0-63, then a step on samples 64-95 with HALF the mean gradient
# (2 micro-batches per rank, each divided by 4: 2/4 of their mean).
short_reference = copy.deepcopy(model)
sgd = torch.optim.SGD(short_reference.parameters(), lr=LR)
for rows, scale in ((slice(0, 64), 1.0), (slice(64, 96), 2 / ACCUMULATION)):
    (scale * torch.nn.functional.mse_loss(short_reference(inputs[rows]), targets[rows])).backward()
    sgd.step()
    sgd.zero_grad()

short_steps, short_weights = short_epoch()
_, per_window_weights = short_epoch(divide_by_window=True)
plain_steps, _ = short_epoch(prepared=False)  # last: it leaves a window open ...
accelerator.step = 0  # ... so close it by hand, as the end of a prepared DataLoader would
accelerator.gradient_state._set_sync_gradients(True)

_claims.equal(
    "end_of_dataloader_closes_short_window",
    measured=short_steps,
    control=plain_steps,
    expected=[4, 6],
    micro_batches_per_rank=6,
)
_claims.at_most(
    "short_window_loss_still_divided_by_k",
    measured=(short_weights - flat_weights(short_reference)).abs().max().item(),
    control=(per_window_weights - flat_weights(short_reference)).abs().max().item(),
    tolerance=TOLERANCE,
)


# --- BatchNorm: a layer that looks at the micro-batch as a whole ---
bn_model = torch.nn.Sequential(
    torch.nn.Linear(8, 32), torch.nn.BatchNorm1d(32), torch.nn.Tanh(), torch.nn.Linear(32, 1)
)


def batchnorm_gap(batch_statistics=True):
    """Largest |weights after one accumulated window (4 micro-batches of 8 per rank) - weights after one
    process's SGD step on the same 64 samples|, for the BatchNorm model in train or eval mode."""
    net, reference_net = copy.deepcopy(bn_model), copy.deepcopy(bn_model)
    for module in (net, reference_net):
        module.train(batch_statistics)  # eval: normalise with the (initial) running statistics
    loader = DataLoader(TensorDataset(inputs[:64], targets[:64]), batch_size=MICRO_BATCH)
    optimizer = torch.optim.SGD(net.parameters(), lr=LR)
    net, optimizer, loader = accelerator.prepare(net, optimizer, loader)
    for x, y in loader:  # 4 micro-batches per rank: one window, one optimizer step
        with accelerator.accumulate(net):
            accelerator.backward(torch.nn.functional.mse_loss(net(x), y))
            optimizer.step()
            optimizer.zero_grad()
    sgd = torch.optim.SGD(reference_net.parameters(), lr=LR)
    torch.nn.functional.mse_loss(reference_net(inputs[:64]), targets[:64]).backward()  # BN over all 64
    sgd.step()
    return (flat_weights(accelerator.unwrap_model(net)) - flat_weights(reference_net)).abs().max().item()


_claims.at_least(
    "batchnorm_breaks_the_equivalence",
    measured=batchnorm_gap(),
    control=batchnorm_gap(batch_statistics=False),
    bound=1e-4,
    samples_per_normalisation=MICRO_BATCH,
    reference_batch=64,
)
