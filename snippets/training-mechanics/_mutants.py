"""Mutants for training-mechanics: the library bugs that the wrong answers on these pages describe.

Each makes Accelerate (or DDP) behave the way a wrong answer says it does: the scheduler counting once per
call, accumulate() syncing every micro-batch, load_state forgetting a piece, save_model waiting for the write.
"""

from verify.mutation import mutant


def _scheduler_step(patch, *, per_process=True, honour_split=True, honour_sync=True, honour_skip=True, honour_unlinked=True):
    """AcceleratedScheduler.step as accelerate/scheduler.py writes it (1.15.0), with one rule switched off."""
    from accelerate.scheduler import AcceleratedScheduler
    from accelerate.state import AcceleratorState

    def step(self, *args, **kwargs):
        patch.ran()
        if not self.step_with_optimizer and honour_unlinked:
            self.scheduler.step(*args, **kwargs)
            return
        if not self.gradient_state.sync_gradients and honour_sync:
            if self.gradient_state.adjust_scheduler:
                self.scheduler._step_count += 1
            return
        if honour_skip:
            for opt in self.optimizers:
                if opt.step_was_skipped:
                    return
        if (self.split_batches and honour_split) or not per_process:
            self.scheduler.step(*args, **kwargs)
            return
        for _ in range(AcceleratorState().num_processes):
            if hasattr(self.scheduler, "total_steps"):
                if self.scheduler._step_count <= self.scheduler.total_steps:
                    self.scheduler.step(*args, **kwargs)
            else:
                self.scheduler.step(*args, **kwargs)

    # A class attribute that is not a plain function: patch.replace does not wrap it, step() records the run.
    patch.replace(AcceleratedScheduler, "step", _Method(step))


class _Method:
    """A descriptor that binds like a function without being one (so patch.replace keeps it as is)."""

    def __init__(self, function):
        self.function = function

    def __get__(self, instance, owner=None):
        return self.function.__get__(instance, owner) if instance is not None else self


# --- the prepared scheduler ---


@mutant(
    "scheduler-steps-once-per-call",
    "the prepared scheduler steps the wrapped scheduler once per call, not num_processes times",
)
def scheduler_steps_once_per_call(patch):
    _scheduler_step(patch, per_process=False)


@mutant(
    "scheduler-ignores-split-batches",
    "the prepared scheduler steps num_processes times per call even with split_batches=True",
)
def scheduler_ignores_split_batches(patch):
    _scheduler_step(patch, honour_split=False)


@mutant(
    "scheduler-ignores-step-with-optimizer-false",
    "the prepared scheduler steps num_processes times per call even with step_scheduler_with_optimizer=False",
)
def scheduler_ignores_step_with_optimizer_false(patch):
    _scheduler_step(patch, honour_unlinked=False)


@mutant(
    "scheduler-steps-during-accumulation",
    "the prepared scheduler also steps on the micro-batches inside accumulate() that do not synchronise",
)
def scheduler_steps_during_accumulation(patch):
    _scheduler_step(patch, honour_sync=False)


@mutant(
    "accelerated-scheduler-ignores-skipped-steps",
    "the prepared scheduler steps even when its optimizer's step was skipped (an fp16 overflow)",
)
def accelerated_scheduler_ignores_skipped_steps(patch):
    _scheduler_step(patch, honour_skip=False)


# --- gradient accumulation ---


@mutant(
    "accumulate-syncs-every-step",
    "accelerator.accumulate() all-reduces the gradients on every micro-batch (as sync_each_batch=True does)",
)
def accumulate_syncs_every_step(patch):
    import contextlib

    from accelerate import Accelerator

    def accumulate(original, self, *models):
        @contextlib.contextmanager
        def every_batch():
            kwargs = self.gradient_state.plugin_kwargs
            before = kwargs.get("sync_each_batch", _MISSING)
            kwargs["sync_each_batch"] = True
            try:
                with original(self, *models):
                    yield
            finally:
                if before is _MISSING:
                    kwargs.pop("sync_each_batch", None)
                else:
                    kwargs["sync_each_batch"] = before

        return every_batch()

    patch.wrap(Accelerator, "accumulate", accumulate)


_MISSING = object()


@mutant(
    "backward-does-not-divide-by-accumulation-steps",
    "accelerator.backward(loss) does not divide the loss by gradient_accumulation_steps",
)
def backward_does_not_divide_by_accumulation_steps(patch):
    from accelerate import Accelerator

    def backward(original, self, loss, **kwargs):
        return original(self, loss * self.gradient_accumulation_steps, **kwargs)

    patch.wrap(Accelerator, "backward", backward)


@mutant(
    "adjust-scheduler-default-honoured",
    "GradientState reads adjust_scheduler as True when the plugin leaves it at its documented default",
)
def adjust_scheduler_default_honoured(patch):
    from accelerate.state import GradientState

    def adjust_scheduler(self):
        patch.ran()
        return self.plugin_kwargs.get("adjust_scheduler", True)

    patch.replace(GradientState, "adjust_scheduler", property(adjust_scheduler))


@mutant(
    "accumulate-ignores-end-of-dataloader",
    "accumulate() does not close a short last window at the end of the prepared DataLoader",
)
def accumulate_ignores_end_of_dataloader(patch):
    from accelerate.state import GradientState

    def end_of_dataloader(self):
        patch.ran()
        return False

    patch.replace(GradientState, "end_of_dataloader", property(end_of_dataloader))


@mutant(
    "prepare-splits-batches-by-default",
    "prepare() splits each DataLoader batch across the processes (split_batches=True) unless told otherwise",
)
def prepare_splits_batches_by_default(patch):
    import accelerate.accelerator

    def prepare_data_loader(original, *args, **kwargs):
        kwargs["split_batches"] = True
        return original(*args, **kwargs)

    patch.wrap(accelerate.accelerator, "prepare_data_loader", prepare_data_loader)


@mutant("reduce-keeps-the-local-value", "accelerator.reduce(t, 'sum') returns each rank's own tensor, not the sum over ranks")
def reduce_keeps_the_local_value(patch):
    from accelerate import Accelerator

    def reduce(original, self, tensor, reduction="sum", scale=1.0):
        return tensor * scale

    patch.wrap(Accelerator, "reduce", reduce)


# --- checkpoints ---


@mutant("load-state-skips-rng", "accelerator.load_state restores model, optimizer and scheduler but not the random states")
def load_state_skips_rng(patch):
    import accelerate.checkpointing
    import accelerate.accelerator

    def load(original, *args, **kwargs):
        import random

        import numpy as np
        import torch

        states = random.getstate(), np.random.get_state(), torch.get_rng_state()
        result = original(*args, **kwargs)
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])
        return result

    patch.wrap(accelerate.accelerator, "load_accelerator_state", load)


@mutant("load-state-skips-scheduler", "accelerator.load_state leaves the learning-rate scheduler as it was")
def load_state_skips_scheduler(patch):
    import accelerate.accelerator

    def load(original, input_dir, models, optimizers, schedulers, *args, **kwargs):
        return original(input_dir, models, optimizers, [], *args, **kwargs)

    patch.wrap(accelerate.accelerator, "load_accelerator_state", load)


@mutant(
    "load-state-restores-rank0-rng-everywhere",
    "every rank restores rank 0's random states (a checkpoint saved on rank 0 only)",
)
def load_state_restores_rank0_rng_everywhere(patch):
    import accelerate.accelerator

    def load(original, input_dir, models, optimizers, schedulers, dataloaders, process_index, *args, **kwargs):
        return original(input_dir, models, optimizers, schedulers, dataloaders, 0, *args, **kwargs)

    patch.wrap(accelerate.accelerator, "load_accelerator_state", load)


@mutant(
    "load-state-restores-dataloader-epoch",
    "save_state records where each prepared DataLoader was (its epoch) and load_state puts it back",
)
def load_state_restores_dataloader_epoch(patch):
    import json
    import os

    from accelerate import Accelerator

    def where(folder, index):
        return os.path.join(folder, f"dataloader_iterations_{index}.json")

    def save_state(original, self, output_dir=None, *args, **kwargs):
        result = original(self, output_dir, *args, **kwargs)
        with open(where(output_dir, self.process_index), "w") as file:
            json.dump([getattr(dl, "iteration", 0) for dl in self._dataloaders], file)
        return result

    def load_state(original, self, input_dir=None, *args, **kwargs):
        result = original(self, input_dir, *args, **kwargs)
        path = where(input_dir, self.process_index)
        if os.path.exists(path):
            with open(path) as file:
                for dl, iteration in zip(self._dataloaders, json.load(file)):
                    dl.set_epoch(iteration)
        return result

    patch.wrap(Accelerator, "save_state", save_state)
    patch.wrap(Accelerator, "load_state", load_state)


@mutant(
    "seedable-sampler-seeds-from-global-rng",
    "the seedable sampler draws its seed from torch's global generator, like the default sampler, not from seed + epoch",
)
def seedable_sampler_seeds_from_global_rng(patch):
    from accelerate.data_loader import SeedableRandomSampler

    def iterate(original, self):
        import torch

        self.initial_seed = int(torch.randint(0, 2**31 - 1, ()).item())
        return original(self)

    patch.wrap(SeedableRandomSampler, "__iter__", iterate)


@mutant("skip-first-batches-skips-nothing", "accelerator.skip_first_batches returns the DataLoader unchanged")
def skip_first_batches_skips_nothing(patch):
    from accelerate import Accelerator

    def skip(original, self, dataloader, num_batches=0):
        return dataloader

    patch.wrap(Accelerator, "skip_first_batches", skip)


@mutant(
    "skip-first-batches-advances-the-epoch",
    "the prepared DataLoader counts the epoch iterated through skip_first_batches as its own, so its next pass shuffles for the next epoch",
)
def skip_first_batches_advances_the_epoch(patch):
    from accelerate import Accelerator

    def skip(original, self, dataloader, num_batches=0):
        skipping = original(self, dataloader, num_batches)  # copies the prepared loader's epoch counter
        if hasattr(dataloader, "iteration"):
            dataloader.iteration += 1  # ... and the prepared loader moves on to the next epoch
        return skipping

    patch.wrap(Accelerator, "skip_first_batches", skip)


# --- saving from several processes ---


@mutant("accelerator-save-writes-on-every-rank", "accelerator.save writes the file on every process, not on the main one only")
def accelerator_save_writes_on_every_rank(patch):
    from accelerate import Accelerator

    inside_save_model = []

    def save(original, self, obj, f, safe_serialization=False):
        if inside_save_model:  # save_model keeps its own main-process write (the shards of one file)
            return original(self, obj, f, safe_serialization=safe_serialization)
        import torch

        torch.save(obj, f)

    def save_model(original, self, *args, **kwargs):
        inside_save_model.append(True)
        try:
            return original(self, *args, **kwargs)
        finally:
            inside_save_model.pop()

    patch.wrap(Accelerator, "save", save)
    patch.wrap(Accelerator, "save_model", save_model)


@mutant(
    "ddp-state-dict-without-prefix",
    "a DDP-wrapped model's state_dict() gives the inner model's keys, without the 'module.' prefix",
)
def ddp_state_dict_without_prefix(patch):
    from torch.nn.parallel import DistributedDataParallel

    def state_dict(original, self, *args, **kwargs):
        return self.module.state_dict(*args, **kwargs)

    patch.wrap(DistributedDataParallel, "state_dict", state_dict)


@mutant(
    "save-model-saves-training-state",
    "accelerator.save_model also writes the optimizer state next to the weights, as save_state does",
)
def save_model_saves_training_state(patch):
    import os

    from accelerate import Accelerator

    def save_model(original, self, model, save_directory, *args, **kwargs):
        result = original(self, model, save_directory, *args, **kwargs)
        if self._optimizers:
            self.save(self._optimizers[0].state_dict(), os.path.join(save_directory, "optimizer.bin"))
        return result

    patch.wrap(Accelerator, "save_model", save_model)


@mutant(
    "save-model-waits-for-the-write",
    "accelerator.save_model returns on every rank only once the main process has written the file (a barrier)",
)
def save_model_waits_for_the_write(patch):
    from accelerate import Accelerator

    def save_model(original, self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        self.wait_for_everyone()
        return result

    patch.wrap(Accelerator, "save_model", save_model)


# --- layers that look at the whole batch ---


@mutant(
    "batchnorm-normalises-with-running-stats",
    "BatchNorm in training mode normalises with its running statistics, so a micro-batch's output does not "
    "depend on the other samples in it (and accumulation would equal a big batch)",
)
def batchnorm_normalises_with_running_stats(patch):
    import torch
    from torch.nn.modules.batchnorm import _BatchNorm

    def forward(original, self, x):
        patch.ran()
        return torch.nn.functional.batch_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0, self.eps
        )

    patch.wrap(_BatchNorm, "forward", forward)


# --- loss scale against learning rate (loss-scale-vs-lr-weight-decay) ---


@mutant(
    "sgd-weight-decay-ignores-lr",
    "SGD shrinks the weights by a fixed factor (1 - weight_decay) per step, whatever the learning rate, so the "
    "decay no longer scales with lr",
)
def sgd_weight_decay_ignores_lr(patch):
    import torch

    def step(original, self, *args, **kwargs):
        decays = [group["weight_decay"] for group in self.param_groups]
        with torch.no_grad():
            for group, decay in zip(self.param_groups, decays):
                group["weight_decay"] = 0.0
                for param in group["params"]:
                    if param.grad is not None:
                        param.mul_(1 - decay)
        try:
            return original(self, *args, **kwargs)
        finally:
            for group, decay in zip(self.param_groups, decays):
                group["weight_decay"] = decay

    patch.wrap(torch.optim.SGD, "step", step)


@mutant(
    "adam-step-proportional-to-gradient",
    "Adam's step grows with the gradient like SGD's (its eps is so large that m / (sqrt(v) + eps) is about m / eps)",
)
def adam_step_proportional_to_gradient(patch):
    import torch

    def init(original, self, params, *args, **kwargs):
        original(self, params, *args, **kwargs)
        for group in self.param_groups:
            group["eps"] = 1.0

    patch.wrap(torch.optim.Adam, "__init__", init)


@mutant(
    "adam-weight-decay-decoupled",
    "torch.optim.Adam's weight_decay is decoupled by default, as AdamW's is",
)
def adam_weight_decay_decoupled(patch):
    import torch

    def init(original, self, params, *args, **kwargs):
        original(self, params, *args, **kwargs)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True

    patch.wrap(torch.optim.Adam, "__init__", init)


# --- momentum correction (momentum-correction) ---


@mutant(
    "sgd-momentum-absorbs-lr",
    "torch.optim.SGD keeps the velocity v = momentum * v + lr * g and steps w -= v (lr inside the history), "
    "so a learning-rate change reaches the history only through new gradients",
)
def sgd_momentum_absorbs_lr(patch):
    import torch

    def step(original, self, closure=None):
        with torch.no_grad():
            for group in self.param_groups:
                for param in group["params"]:
                    if param.grad is None:
                        continue
                    state = self.state[param]
                    grad = param.grad.add(param, alpha=group["weight_decay"])
                    if "absorbed_velocity" not in state:
                        state["absorbed_velocity"] = group["lr"] * grad
                    else:
                        state["absorbed_velocity"].mul_(group["momentum"]).add_(grad, alpha=group["lr"])
                    param.sub_(state["absorbed_velocity"])

    patch.wrap(torch.optim.SGD, "step", step)
