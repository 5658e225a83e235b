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


@mutant("clip-grad-norm-returns-clipped-norm", "accelerator.clip_grad_norm_ returns the norm after clipping (at most max_norm), not the total norm before")
def clip_grad_norm_returns_clipped_norm(patch):
    from accelerate import Accelerator

    def clipped(original, self, parameters, max_norm, norm_type=2):
        return original(self, parameters, max_norm, norm_type=norm_type).clamp(max=max_norm)

    patch.wrap(Accelerator, "clip_grad_norm_", clipped)


@mutant("clip-grad-norm-per-parameter", "accelerator.clip_grad_norm_ clips each parameter's gradient by its own norm")
def clip_grad_norm_per_parameter(patch):
    import torch
    from accelerate import Accelerator

    def per_parameter(original, self, parameters, max_norm, norm_type=2):
        parameters = [p for p in parameters if p.grad is not None]
        total = torch.nn.utils.get_total_norm([p.grad for p in parameters], norm_type)
        for p in parameters:
            torch.nn.utils.clip_grad_norm_([p], max_norm, norm_type=norm_type)
        return total

    patch.wrap(Accelerator, "clip_grad_norm_", per_parameter)


@mutant("clip-grad-norm-skips-clipping", "accelerator.clip_grad_norm_ computes and returns the norm but leaves the gradients unscaled")
def clip_grad_norm_skips_clipping(patch):
    import torch
    from accelerate import Accelerator

    def norm_only(original, self, parameters, max_norm, norm_type=2):
        return torch.nn.utils.get_total_norm([p.grad for p in parameters if p.grad is not None], norm_type)

    patch.wrap(Accelerator, "clip_grad_norm_", norm_only)


@mutant("accumulate-syncs-every-micro-batch", "accumulate() sets sync_gradients on every micro-batch, so the optimizer steps on each one")
def accumulate_syncs_every_micro_batch(patch):
    from accelerate import Accelerator

    def always(original, self):
        original(self)
        self.gradient_state._set_sync_gradients(True)

    patch.wrap(Accelerator, "_do_sync", always)


@mutant("clip-grad-norm-local-shard-norm", "clip_grad_norm_ on sharded (DTensor) gradients uses the norm of each rank's local shard")
def clip_grad_norm_local_shard_norm(patch):
    import torch
    from torch.distributed.tensor import DTensor

    def local_norm(original, parameters, max_norm, norm_type=2.0, *args, **kwargs):
        parameters = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
        grads = [p.grad for p in parameters if p.grad is not None]
        if not any(isinstance(g, DTensor) for g in grads):
            return original(parameters, max_norm, norm_type, *args, **kwargs)
        local = [g.to_local() if isinstance(g, DTensor) else g for g in grads]
        total = torch.nn.utils.get_total_norm(local, norm_type)
        scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        for g in local:  # each rank scales its own shard by its own shard's norm
            g.mul_(scale)
        return total

    patch.wrap(torch.nn.utils, "clip_grad_norm_", local_norm)


@mutant("accumulate-no-sync-first-model-only", "accumulate(a, b) puts only the first model it is given under no_sync")
def accumulate_no_sync_first_model_only(patch):
    from accelerate import Accelerator

    def first_only(original, self, *models):
        return original(self, *models[:1])

    patch.wrap(Accelerator, "accumulate", first_only)


@mutant("accelerated-optimizer-steps-every-micro-batch", "a prepared optimizer steps on every call, ignoring sync_gradients under accumulation")
def accelerated_optimizer_steps_every_micro_batch(patch):
    from accelerate.optimizer import AcceleratedOptimizer

    def always(original, self, closure=None):
        self.optimizer.step(closure)

    patch.wrap(AcceleratedOptimizer, "step", always)


@mutant("prepare-wraps-first-model-only", "prepare() wraps only the first model in DDP; a second model stays a plain local module")
def prepare_wraps_first_model_only(patch):
    import torch
    from accelerate import Accelerator

    def first_only(original, self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        if not isinstance(result, tuple):
            return result
        wrapped = [i for i, obj in enumerate(result) if isinstance(obj, torch.nn.parallel.DistributedDataParallel)]
        result = list(result)
        for i in wrapped[1:]:
            result[i] = result[i].module  # same parameters, no all-reduce
        return tuple(result)

    patch.wrap(Accelerator, "prepare", first_only)


@mutant("main-process-first-does-not-wait", "main_process_first lets every process into the block at once (no barrier before the others enter)")
def main_process_first_does_not_wait(patch):
    from accelerate.state import PartialState

    def no_barrier(self, is_main):  # a generator, as the original: `yield from` drives it
        yield

    patch.replace(PartialState, "_goes_first", no_barrier)


@mutant("local-main-process-first-uses-global-rank", "local_main_process_first lets only the global main process go first, not each node's local main")
def local_main_process_first_uses_global_rank(patch):
    from accelerate.state import PartialState

    def global_first(original, self):
        return self.main_process_first()

    patch.wrap(PartialState, "local_main_process_first", global_first)


@mutant("main-process-first-uses-local-rank", "main_process_first lets each node's local main go first, not only the global main process")
def main_process_first_uses_local_rank(patch):
    from accelerate.state import PartialState

    def local_first(original, self):
        return self.local_main_process_first()

    patch.wrap(PartialState, "main_process_first", local_first)


@mutant("fp16-compress-hook-sends-fp32", "the fp16 compression hook all-reduces the float32 gradient uncompressed")
def fp16_compress_hook_sends_fp32(patch):
    import torch
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    def uncompressed(process_group, bucket) -> torch.futures.Future[torch.Tensor]:
        return default_hooks.allreduce_hook(process_group, bucket)

    patch.replace(default_hooks, "fp16_compress_hook", uncompressed)


@mutant("ddp-accepts-bf16-hook-anywhere", "DDP registers the bf16 compression hook on any build and backend")
def ddp_accepts_bf16_hook_anywhere(patch):
    from torch.nn.parallel import DistributedDataParallel

    def skip_bf16_check(original, self, hook):
        if hook.__name__ in ("bf16_compress_hook", "bf16_compress_wrapper_hook"):
            return None
        return original(self, hook)

    patch.wrap(DistributedDataParallel, "_check_comm_hook", skip_bf16_check)


@mutant("powersgd-hook-sends-full-gradient", "the PowerSGD hook all-reduces the whole gradient bucket, never the low-rank factors")
def powersgd_hook_sends_full_gradient(patch):
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    def full(state, bucket) -> torch.futures.Future[torch.Tensor]:
        group = state.process_group if state.process_group is not None else dist.group.WORLD
        return default_hooks._allreduce_fut(group, bucket.buffer())

    patch.replace(powerSGD_hook, "powerSGD_hook", full)


@mutant("powersgd-starts-at-first-iteration", "PowerSGD compresses from the first iterations by default (no 1000-iteration warm-up)")
def powersgd_starts_at_first_iteration(patch):
    from torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook import PowerSGDState

    def early(original, self, process_group, *args, **kwargs):
        kwargs["start_powerSGD_iter"] = 2
        return original(self, process_group, *args, **kwargs)

    patch.wrap(PowerSGDState, "__init__", early)


@mutant("trackers-run-on-every-process", "init_trackers and log run on every process, not only the main one (one run per process)")
def trackers_run_on_every_process(patch):
    from accelerate import Accelerator
    from accelerate.tracking import LOGGER_TYPE_TO_CLASS, GeneralTracker

    def init_everywhere(self, project_name, config=None, init_kwargs=None):  # Accelerator.init_trackers, ungated
        init_kwargs = init_kwargs or {}
        for tracker in self.log_with:
            if isinstance(tracker, GeneralTracker):
                self.trackers.append(tracker)
            else:
                tracker_init = LOGGER_TYPE_TO_CLASS[str(tracker)]
                args = (project_name, self.logging_dir) if tracker_init.requires_logging_directory else (project_name,)
                self.trackers.append(tracker_init(*args, **init_kwargs.get(str(tracker), {})))
        for tracker in self.trackers:
            tracker.start()
        if config is not None:
            for tracker in self.trackers:
                tracker.store_init_configuration(config)

    def log_everywhere(self, values, step=None, log_kwargs=None):  # Accelerator.log, ungated
        for tracker in self.trackers:
            tracker.log(values, step=step, **(log_kwargs or {}).get(tracker.name, {}))

    patch.replace(Accelerator, "init_trackers", init_everywhere)
    patch.replace(Accelerator, "log", log_everywhere)


@mutant("log-drops-step", "accelerator.log does not pass the step to the trackers")
def log_drops_step(patch):
    from accelerate import Accelerator

    def no_step(original, self, values, step=None, log_kwargs=None):
        return original(self, values, step=None, log_kwargs=log_kwargs)

    patch.wrap(Accelerator, "log", no_step)
