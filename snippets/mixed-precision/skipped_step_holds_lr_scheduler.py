# What happens to the learning-rate schedule when GradScaler skips an optimizer step.
# With Accelerate, optimizer.step() on the prepared optimizer records whether the scaler really
# called the inner step (AcceleratedOptimizer.step_was_skipped), and the prepared scheduler's step()
# returns early when it was skipped (AcceleratedScheduler.step), so the LR stays where it was.
# Plain PyTorch (scaler.step(opt); scheduler.step()) advances the LR anyway, and when it is the
# very first step it warns "Detected call of `lr_scheduler.step()` before `optimizer.step()`", even with the
# warning filter that importing accelerate installs: that filter only hides warnings raised from inside
# torch/optim/lr_scheduler.py (a ChainedScheduler stepping its members), not those of your own scheduler.step().
#
# All of that holds for an optimizer that GradScaler skips (SGD and AdamW as torch builds them by default).
# A FUSED optimizer (fused=True; transformers' Trainer picks adamw_torch_fused on torch >= 2.8) sets
# _step_supports_amp_scaling: GradScaler.step then calls its step() on EVERY step and the fused kernel
# skips the update itself, reading the found_inf tensor the scaler hands it. Accelerate decides "skipped"
# by whether the inner step() was called, so after the same overflow it reports step_was_skipped False,
# the prepared scheduler steps, and the plain loop gives no warning, while the weights do not change.
#
# On a CPU, Accelerator(mixed_precision="fp16") builds no scaler (see the page on how Accelerate
# wires mixed precision), so two lines below stand in for what Accelerator.__init__ does on a GPU:
# native_amp = True and a GradScaler (there GradScaler("cuda"), here GradScaler("cpu")). From them,
# Accelerate's own prepare(), backward(), AcceleratedOptimizer and AcceleratedScheduler run unmodified;
# the autocast they enter is torch.autocast("cpu", dtype=torch.float16), not the CUDA one.
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
accelerator.scaler = torch.amp.GradScaler("cpu")  # --- ... which builds GradScaler("cuda") there
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
    with warnings.catch_warnings(record=True) as seen:  # the filters as `import accelerate` left them
        scaler.scale(loss_of(model, first_batch)).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
    changed = int((weight(model) != before).sum())
    return scheduler.get_last_lr()[0], sum("before `optimizer.step()`" in str(w.message) for w in seen), changed


plain_lr, plain_warnings, plain_changed = plain_torch(overflow)
_, clean_warnings, _ = plain_torch(clean)


# --- What the filter accelerate/scheduler.py installs at import really hides ---
# warnings.filterwarnings("ignore", category=UserWarning, module="torch.optim.lr_scheduler") matches the module
# a warning is attributed to. LRScheduler.step warns with stacklevel=2, i.e. on behalf of its caller: your
# script (so the plain loop above still warns), or, for a ChainedScheduler stepping its members,
# torch/optim/lr_scheduler.py itself (hidden).
def chained_scheduler_warnings(override_accelerate_filter=False):
    optimizer = torch.optim.SGD(copy.deepcopy(base).parameters(), lr=LR)
    chained = torch.optim.lr_scheduler.ChainedScheduler([torch.optim.lr_scheduler.StepLR(optimizer, 1, GAMMA)])
    with warnings.catch_warnings(record=True) as seen:
        if override_accelerate_filter:  # control: a "default" filter for the same module, placed in front
            warnings.filterwarnings("default", category=UserWarning, module="torch.optim.lr_scheduler")
        chained.step()  # no optimizer.step() yet: the member StepLR warns from inside lr_scheduler.py
    return sum("before `optimizer.step()`" in str(w.message) for w in seen)


# --- The same overflow step with AdamW, for-loop (fused=False) against fused=True ---
def accelerate_adamw(fused):
    accelerator.scaler = torch.amp.GradScaler("cpu")  # a fresh scale of 65536 for each run (bound at prepare)
    model = copy.deepcopy(base)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, fused=fused)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=GAMMA)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    steps = []
    for batch in (overflow, clean):
        before = weight(model)
        accelerator.backward(loss_of(model, batch))
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        steps.append(
            dict(
                skipped=optimizer.step_was_skipped,
                lr=scheduler.get_last_lr()[0],
                weights_changed=int((weight(model) != before).sum()),
                scale=accelerator.scaler.get_scale(),
            )
        )
    amp_scaling = getattr(optimizer.optimizer, "_step_supports_amp_scaling", False)
    return steps, amp_scaling


def plain_adamw_warnings(fused):
    """The plain AMP loop (scaler.step; scaler.update; scheduler.step) with AdamW, first batch overflowing."""
    model = accelerator.prepare(copy.deepcopy(base))
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, fused=fused)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=GAMMA)
    scaler = torch.amp.GradScaler("cpu")
    with warnings.catch_warnings(record=True) as seen:
        scaler.scale(loss_of(model, overflow)).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
    return sum("before `optimizer.step()`" in str(w.message) for w in seen), scheduler.get_last_lr()[0]


fused_steps, fused_amp_scaling = accelerate_adamw(fused=True)
loop_steps, loop_amp_scaling = accelerate_adamw(fused=False)
fused_plain_warnings, fused_plain_lr = plain_adamw_warnings(fused=True)
loop_plain_warnings, _ = plain_adamw_warnings(fused=False)

accelerate_filter = [
    f for f in warnings.filters if f[0] == "ignore" and f[3] is not None and f[3].pattern == "torch.optim.lr_scheduler"
]

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
    accelerate_filter_installed=bool(accelerate_filter),  # the plain loop warned with it in place
    warnings_with_accelerate=record[0]["warnings"] + record[1]["warnings"],
)
_claims.equal(
    "accelerate_filter_hides_only_warnings_raised_inside_lr_scheduler",
    measured=chained_scheduler_warnings(),
    control=chained_scheduler_warnings(override_accelerate_filter=True),  # control: Accelerate's filter overridden
    expected=0,
    accelerate_filter_installed=bool(accelerate_filter),
)

# --- Fused AdamW: the same overflow step is skipped by the kernel, not by GradScaler ---
_claims.equal(
    "fused_kernel_skips_the_overflow_update",
    measured=fused_steps[0]["weights_changed"],
    control=fused_steps[1]["weights_changed"],  # control: the next, clean step of the same fused optimizer
    expected=0,
    step_supports_amp_scaling=fused_amp_scaling,
    scale_after_overflow=fused_steps[0]["scale"],
)
_claims.equal(
    "fused_overflow_step_is_not_flagged",
    measured=fused_steps[0]["skipped"],
    control=loop_steps[0]["skipped"],  # control: the same step with AdamW(fused=False), which GradScaler skips
    expected=False,
    weights_changed_fused=fused_steps[0]["weights_changed"],
    weights_changed_for_loop=loop_steps[0]["weights_changed"],
    for_loop_step_supports_amp_scaling=loop_amp_scaling,
)
_claims.equal(
    "fused_overflow_step_moves_the_lr",
    measured=fused_steps[0]["lr"],
    control=loop_steps[0]["lr"],  # control: AdamW(fused=False): the prepared scheduler holds at 0.1
    expected=LR * GAMMA**accelerator.num_processes,
    lr_after_next_clean_step_fused=fused_steps[1]["lr"],
    lr_after_next_clean_step_for_loop=loop_steps[1]["lr"],
)
_claims.equal(
    "fused_first_step_overflow_gives_no_warning",
    measured=fused_plain_warnings,
    control=loop_plain_warnings,  # control: the same plain loop with AdamW(fused=False): 1 warning
    expected=0,
    plain_lr_after_skipped_step_fused=fused_plain_lr,
)
