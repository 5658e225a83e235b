# What happens to the learning-rate schedule when GradScaler skips an optimizer step.
# With Accelerate, optimizer.step() on the prepared optimizer records whether the scaler really
# called the inner step (AcceleratedOptimizer.step_was_skipped), and the prepared scheduler's step()
# returns early when it was skipped (AcceleratedScheduler.step), so the LR stays where it was.
# Plain PyTorch (scaler.step(opt); scheduler.step()) advances the LR anyway, and when it is the
# very first step it warns "Detected call of `lr_scheduler.step()` before `optimizer.step()`".
#
# On a CPU, Accelerator(mixed_precision="fp16") builds no scaler (see the page on how Accelerate
# wires mixed precision), so two lines below do by hand what Accelerator.__init__ does on a GPU:
# native_amp = True and a GradScaler. prepare() then builds the usual fp16 pipeline from them.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/mixed-precision/skipped_step_holds_lr_scheduler.py
import copy
import warnings

import torch
from accelerate import Accelerator

import _claims

LR, GAMMA = 0.1, 0.5
accelerator = Accelerator(mixed_precision="fp16")
accelerator.native_amp = True  # --- stand-in for the GPU branch of Accelerator.__init__ ...
accelerator.scaler = torch.amp.GradScaler("cpu")  # --- ... which builds a GradScaler there
rank = accelerator.process_index

torch.manual_seed(0)
base = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 1))
torch.manual_seed(1 + rank)
clean = torch.randn(8, 16)
overflow = clean.clone()
if rank == 1:
    overflow[0, 0] = 70000.0  # inf once autocast casts it to float16: an overflow on one rank only


def loss_of(model, batch):
    return model(batch).float().square().mean()  # prepared forward runs under fp16 autocast


def weight(model):
    return accelerator.unwrap_model(model)[0].weight.detach().clone()


# --- Accelerate: prepared optimizer and scheduler (StepLR halves the LR at every scheduler step) ---
model = copy.deepcopy(base)
optimizer = torch.optim.SGD(model.parameters(), lr=LR)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=GAMMA)
model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
record = []
for batch in (overflow, clean):
    before = weight(model)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        accelerator.backward(loss_of(model, batch))  # scaler.scale(loss).backward()
        optimizer.step()  # scaler.step + scaler.update; sets step_was_skipped
        scheduler.step()  # returns early if any prepared optimizer skipped
        optimizer.zero_grad()
    record.append(
        dict(
            skipped=optimizer.step_was_skipped,
            lr=scheduler.get_last_lr()[0],
            weights_changed=int((weight(model) != before).sum()),
            scale=accelerator.scaler.get_scale(),
            warnings=sum("before `optimizer.step()`" in str(w.message) for w in seen),
        )
    )


# --- Control: plain PyTorch AMP loop on the same prepared (DDP, autocast) model ---
def plain_torch(first_batch):
    model = accelerator.prepare(copy.deepcopy(base))  # the model only: raw optimizer and scheduler
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=GAMMA)
    scaler = torch.amp.GradScaler("cpu")
    before = weight(model)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")  # accelerate/scheduler.py silences torch.optim.lr_scheduler warnings
        scaler.scale(loss_of(model, first_batch)).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
    changed = int((weight(model) != before).sum())
    return scheduler.get_last_lr()[0], sum("before `optimizer.step()`" in str(w.message) for w in seen), changed


plain_lr, plain_warnings, plain_changed = plain_torch(overflow)
_, clean_warnings, _ = plain_torch(clean)

_claims.equal(
    "skipped_step_keeps_the_lr",
    measured=record[0]["lr"],
    control=plain_lr,  # control: plain scheduler.step() after the same skipped step
    expected=LR,
    weights_changed_accelerate=record[0]["weights_changed"],
    weights_changed_plain=plain_changed,
    lr_after_next_clean_step=record[1]["lr"],  # stepped num_processes times (split_batches=False)
    num_processes=accelerator.num_processes,
)
_claims.equal(
    "step_was_skipped_flags_the_overflow",
    measured=record[0]["skipped"],
    control=record[1]["skipped"],  # control: the next step, on a clean batch
    expected=True,
    scale_after_overflow=record[0]["scale"],
    scale_after_clean_step=record[1]["scale"],
)
_claims.equal(
    "plain_torch_warns_when_first_step_skipped",
    measured=plain_warnings,
    control=clean_warnings,  # control: the same plain loop whose first step is clean
    expected=1,
    warnings_with_accelerate=record[0]["warnings"] + record[1]["warnings"],
)
