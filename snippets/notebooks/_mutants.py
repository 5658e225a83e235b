"""Mutants for notebooks: notebook_launcher behaving the way a wrong answer or a plausible change would have it
behave. The launcher forks its workers, so a patch made before the call is inherited by them.

Imports of accelerate stay inside the functions: loading this catalogue costs nothing.
"""

from verify.mutation import mutant


def _wrap_launcher(patch, replacement):
    import accelerate
    import accelerate.launchers

    patch.wrap(accelerate.launchers, "notebook_launcher", replacement)
    patch.wrap(accelerate, "notebook_launcher", replacement)


@mutant(
    "notebook-launcher-sets-cpu-flag",
    "notebook_launcher notices there is no GPU and puts its CPU processes in one gloo world by itself "
    "(as if ACCELERATE_USE_CPU=true were set)",
)
def notebook_launcher_sets_cpu_flag(patch):
    import os

    import torch

    def launcher(original, *args, **kwargs):
        if not torch.cuda.is_available():
            os.environ["ACCELERATE_USE_CPU"] = "true"
        return original(*args, **kwargs)

    _wrap_launcher(patch, launcher)


@mutant(
    "notebook-launcher-ignores-existing-accelerator",
    "notebook_launcher starts its processes although an Accelerator already exists in the notebook's process",
)
def notebook_launcher_ignores_existing_accelerator(patch):
    def launcher(original, *args, **kwargs):
        from accelerate.state import AcceleratorState, PartialState

        AcceleratorState._reset_state(reset_partial_state=True)  # forget it instead of refusing
        PartialState._reset_state()
        return original(*args, **kwargs)

    _wrap_launcher(patch, launcher)


# The notebook labs (docs/labs/lab*.py) fork their workers with notebook_launcher too; these mutants are the
# library bugs their claims must catch.


@mutant(
    "accelerate-bf16-autocast-off",
    "Accelerator(mixed_precision='bf16') runs the model's forward without autocast (full float32)",
)
def accelerate_bf16_autocast_off(patch):
    import contextlib

    import accelerate.accelerator

    class NoAutocast(contextlib.ContextDecorator):  # prepare_model uses the context as a decorator of forward
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    patch.wrap(accelerate.accelerator, "get_mixed_precision_context_manager",
               lambda original, *args, **kwargs: NoAutocast())


@mutant(
    "grad-scaler-does-not-scale",
    "torch.amp.GradScaler.scale returns the loss unscaled, while unscale_ still divides by the scale",
)
def grad_scaler_does_not_scale(patch):
    import torch

    def scale(original, self, outputs):
        original(self, outputs)  # the real call creates the scale tensor that unscale_ divides by
        return outputs  # ... but the loss goes back unscaled

    patch.wrap(torch.amp.GradScaler, "scale", scale)


@mutant(
    "load-state-restores-nothing",
    "accelerator.load_state reads the checkpoint folder but restores neither model, optimizer nor RNG states",
)
def load_state_restores_nothing(patch):
    from accelerate.accelerator import Accelerator

    patch.wrap(Accelerator, "load_state", lambda original, self, *args, **kwargs: None)
