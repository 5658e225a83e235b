"""Mutants for the training-loop pages written in issue 18 part 3 (Local SGD, gradient clipping, several
models, run-once, DDP comm hooks, trackers): the library behaving the way the wrong answers say.
Names are global; the pages live in data-parallelism/ and accelerate-api/."""

from verify.mutation import mutant


@mutant("local-sgd-keeps-gradient-all-reduce", "LocalSGD does not enter no_sync: DDP still all-reduces the gradients every step")
def local_sgd_keeps_gradient_all_reduce(patch):
    import contextlib

    from accelerate.local_sgd import LocalSGD

    def enter(original, self):
        self.model_sync_obj = contextlib.nullcontext()  # no no_sync: the reducer all-reduces as usual
        return self

    patch.wrap(LocalSGD, "__enter__", enter)


@mutant("local-sgd-never-averages", "LocalSGD waits for the other ranks at a sync but never averages the parameters")
def local_sgd_never_averages(patch):
    from accelerate.local_sgd import LocalSGD

    def barrier_only(original, self):
        self.accelerator.wait_for_everyone()

    patch.wrap(LocalSGD, "_sync_and_avg_model_params", barrier_only)


@mutant("local-sgd-sums-parameters", "LocalSGD's synchronisation sums the ranks' parameters instead of averaging them")
def local_sgd_sums_parameters(patch):
    from accelerate.local_sgd import LocalSGD

    def summed(original, self):
        self.accelerator.wait_for_everyone()
        for param in self.model.parameters():
            param.data = self.accelerator.reduce(param.data, reduction="sum")

    patch.wrap(LocalSGD, "_sync_and_avg_model_params", summed)


@mutant("local-sgd-syncs-every-step", "LocalSGD ignores local_sgd_steps and averages the parameters after every step")
def local_sgd_syncs_every_step(patch):
    from accelerate.local_sgd import LocalSGD

    def every_step(original, self):
        self.num_steps += 1
        self._sync_and_avg_model_params()

    patch.wrap(LocalSGD, "step", every_step)
