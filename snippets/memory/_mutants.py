"""Mutants for the memory pages: the library behaving the way the wrong answers say."""

from verify.mutation import mutant


@mutant("checkpoint-keeps-activations", "torch.utils.checkpoint runs the block normally and keeps its activations")
def checkpoint_keeps_activations(patch):
    import torch.utils.checkpoint

    patch.wrap(torch.utils.checkpoint, "checkpoint", lambda original, function, *args, **kwargs: function(*args))


@mutant("checkpoint-forgets-rng-state", "checkpoint recomputes with a fresh random state, so dropout draws a new mask")
def checkpoint_forgets_rng_state(patch):
    import torch.utils.checkpoint

    def fresh_rng(original, function, *args, **kwargs):
        return original(function, *args, **{**kwargs, "preserve_rng_state": False})

    patch.wrap(torch.utils.checkpoint, "checkpoint", fresh_rng)


@mutant("init-empty-weights-allocates", "init_empty_weights builds the model with real, allocated weights")
def init_empty_weights_allocates(patch):
    import contextlib

    import accelerate.big_modeling

    patch.wrap(accelerate.big_modeling, "init_on_device", lambda original, device, include_buffers=None: contextlib.nullcontext())


@mutant("adam-keeps-no-state", "AdamW keeps no per-parameter state between steps (no moment buffers)")
def adam_keeps_no_state(patch):
    import torch

    def stateless(original, self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        self.state.clear()  # the moments are dropped after every step
        return result

    patch.wrap(torch.optim.AdamW, "step", stateless)
