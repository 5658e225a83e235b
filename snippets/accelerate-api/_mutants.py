"""Mutants for accelerate-api: the library bugs that the wrong answers on these pages describe.

Each patches accelerate (or torch) where the snippets' calls resolve (see /work/wt/MUTANTS-SPEC.md).
"""

from verify.mutation import mutant

# --- printing, logging, trackers, main_process_first ---------------------------------------------------


@mutant("accelerator-print-on-every-process", "accelerator.print prints on every process, like the built-in print")
def accelerator_print_on_every_process(patch):
    from accelerate.state import PartialState

    patch.wrap(PartialState, "print", lambda original, self, *args, **kwargs: print(*args, **kwargs))


@mutant("get-logger-logs-on-every-process", "accelerate's get_logger logs on every process by default")
def get_logger_logs_on_every_process(patch):
    from accelerate.logging import MultiProcessAdapter

    patch.wrap(MultiProcessAdapter, "_should_log", lambda original, main_process_only: True)


@mutant("get-logger-drops-rank-prefix", "get_logger's records carry no \"[RANK i]\" prefix (as before accelerate 1.13)")
def get_logger_drops_rank_prefix(patch):
    import logging

    from accelerate.logging import MultiProcessAdapter

    def process(original, self, msg, kwargs):
        msg, kwargs = logging.LoggerAdapter.process(self, msg, kwargs)
        kwargs.setdefault("stacklevel", 2)
        return msg, kwargs

    patch.wrap(MultiProcessAdapter, "process", process)


@mutant("get-logger-ignores-in-order",
        "get_logger's in_order has no effect with main_process_only=False: every process logs at once (as up to accelerate 1.12)")
def get_logger_ignores_in_order(patch):
    from accelerate.logging import MultiProcessAdapter

    def log(original, self, level, msg, *args, **kwargs):
        if kwargs.pop("in_order", False):
            patch.ran()
        return original(self, level, msg, *args, **kwargs)

    patch.wrap(MultiProcessAdapter, "log", log)


@mutant(
    "accelerator-log-on-every-process",
    "Accelerate's main-process gate lets every process through: init_trackers and log run on all of them",
)
def accelerator_log_on_every_process(patch):
    from accelerate.state import PartialState

    patch.wrap(PartialState, "on_main_process", lambda original, self, function=None: function)


@mutant(
    "main-process-first-lets-others-go-first",
    "main_process_first lets the other processes run the block first and the main process after them",
)
def main_process_first_lets_others_go_first(patch):
    from accelerate.state import PartialState

    patch.wrap(PartialState, "_goes_first", lambda original, self, is_main: original(self, not is_main))


@mutant(
    "main-process-first-without-barriers",
    "main_process_first has no barriers: every process runs the block at once",
)
def main_process_first_without_barriers(patch):
    from accelerate.state import PartialState

    def goes_first(original, self, is_main):  # main_process_first does `yield from self._goes_first(...)`
        yield

    patch.wrap(PartialState, "_goes_first", goes_first)


# --- prepare, unwrap_model, devices -----------------------------------------------------------------------


@mutant("prepare-skips-ddp-wrap", "prepare() moves the model to the device but does not wrap it in DistributedDataParallel")
def prepare_skips_ddp_wrap(patch):
    from accelerate import Accelerator
    from torch.nn.parallel import DistributedDataParallel

    def prepare_model(original, self, *args, **kwargs):
        model = original(self, *args, **kwargs)
        return model.module if isinstance(model, DistributedDataParallel) else model

    patch.wrap(Accelerator, "prepare_model", prepare_model)


@mutant("unwrap-model-returns-wrapper", "unwrap_model hands back the prepared wrapper itself (DistributedDataParallel)")
def unwrap_model_returns_wrapper(patch):
    import accelerate.accelerator

    patch.wrap(accelerate.accelerator, "extract_model_from_parallel", lambda original, model, *args, **kwargs: model)


@mutant("unwrap-model-returns-a-copy", "unwrap_model returns a copy of the model, not the module the wrapper trains")
def unwrap_model_returns_a_copy(patch):
    import copy

    import accelerate.accelerator

    def extract(original, model, keep_fp32_wrapper=True, *args, **kwargs):
        inner = original(model, True, *args, **kwargs)  # the module the wrapper trains, untouched
        duplicate = copy.copy(inner)  # a new module object over the same tensors and submodules
        duplicate.__dict__ = dict(inner.__dict__)
        if not keep_fp32_wrapper:  # strips the autocast of the copy, not of the module that trains
            duplicate = original(duplicate, False, *args, **kwargs)
        return duplicate

    patch.wrap(accelerate.accelerator, "extract_model_from_parallel", extract)


@mutant(
    "unwrap-model-strips-autocast-by-default",
    "unwrap_model removes the mixed-precision autocast unless told to keep it (keep_fp32_wrapper=False by default)",
)
def unwrap_model_strips_autocast_by_default(patch):
    from accelerate import Accelerator

    def unwrap_model(original, self, model, keep_fp32_wrapper=False, *args, **kwargs):
        return original(self, model, keep_fp32_wrapper, *args, **kwargs)

    patch.wrap(Accelerator, "unwrap_model", unwrap_model)


@mutant(
    "local-rank-read-from-rank",
    "Accelerate reads the local process index from RANK (the global rank), as int(dist.get_rank()) would",
)
def local_rank_read_from_rank(patch):
    import dataclasses

    import accelerate.utils.environment as environment

    def information(original, *args, **kwargs):
        seen = original(*args, **kwargs)
        return dataclasses.replace(seen, local_rank=seen.rank)

    patch.wrap(environment, "get_cpu_distributed_information", information)


@mutant(
    "accelerate-detects-cpu-without-flag",
    "without a GPU Accelerate forms a multi-process CPU (gloo) job by itself, without ACCELERATE_USE_CPU",
)
def accelerate_detects_cpu_without_flag(patch):
    import torch
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType

    def prepare_backend(original, self, cpu=False, *args, **kwargs):
        if not cpu and not torch.cuda.is_available():
            return "gloo", DistributedType.MULTI_CPU
        return original(self, cpu, *args, **kwargs)

    patch.wrap(PartialState, "_prepare_backend", prepare_backend)


@mutant("device-placement-off-by-default",
        "Accelerator leaves the model where it is unless device_placement=True is passed")
def device_placement_off_by_default(patch):
    from accelerate import Accelerator

    def init(original, self, *args, **kwargs):
        return original(self, *args, **{"device_placement": False, **kwargs})

    patch.wrap(Accelerator, "__init__", init)


@mutant("default-device-prefers-cuda-over-mps", "PartialState.default_device checks CUDA before Apple's MPS")
def default_device_prefers_cuda_over_mps(patch):
    import torch
    from accelerate.state import PartialState

    original = PartialState.default_device.fget

    def default_device(self):
        patch.ran()
        return torch.device("cuda") if torch.cuda.is_available() else original(self)

    patch.replace(PartialState, "default_device", property(default_device))


# --- mixed precision --------------------------------------------------------------------------------------


@mutant(
    "accelerate-autocast-disabled",
    "Accelerate's mixed-precision context is a disabled autocast: forward runs in float32 under mixed_precision=\"bf16\"",
)
def accelerate_autocast_disabled(patch):
    import torch

    import accelerate.accelerator
    import accelerate.utils.modeling

    def context(original, native_amp=False, autocast_kwargs=None):
        device_type = "cuda" if torch.cuda.is_available() else "cpu"
        if not native_amp:
            return original(native_amp, autocast_kwargs)
        return torch.autocast(device_type=device_type, enabled=False)

    patch.wrap(accelerate.utils.modeling, "get_mixed_precision_context_manager", context)
    patch.wrap(accelerate.accelerator, "get_mixed_precision_context_manager", context)


@mutant(
    "autocast-output-not-cast-back",
    "prepare() does not cast the model's outputs back to float32 (no convert_outputs_to_fp32)",
)
def autocast_output_not_cast_back(patch):
    import accelerate.accelerator

    patch.wrap(accelerate.accelerator, "convert_outputs_to_fp32", lambda original, forward: forward)


@mutant(
    "accelerate-bf16-casts-model-weights",
    "mixed_precision=\"bf16\" casts the model's weights to bfloat16 (so gradients and Adam states are bf16 too)",
)
def accelerate_bf16_casts_model_weights(patch):
    import torch
    from accelerate import Accelerator

    def prepare_model(original, self, model, *args, **kwargs):
        if self.mixed_precision == "bf16":
            model.to(torch.bfloat16)
        return original(self, model, *args, **kwargs)

    patch.wrap(Accelerator, "prepare_model", prepare_model)


@mutant(
    "accelerator-backward-skips-loss-scaling",
    "accelerator.backward under fp16 calls loss.backward() without the GradScaler's scaling",
)
def accelerator_backward_skips_loss_scaling(patch):
    from accelerate import Accelerator

    def backward(original, self, loss, **kwargs):
        if self.scaler is not None:
            return loss.backward(**kwargs)
        return original(self, loss, **kwargs)

    patch.wrap(Accelerator, "backward", backward)


# --- find_executable_batch_size ---------------------------------------------------------------------------


@mutant("find-batch-size-halves", "find_executable_batch_size halves the batch after an out-of-memory error (x0.5)")
def find_batch_size_halves(patch):
    import accelerate.utils

    def find(original, function=None, starting_batch_size=128, reduce_batch_size_fn=None, *args, **kwargs):
        if reduce_batch_size_fn is None:
            size = [starting_batch_size]

            def reduce_batch_size_fn():
                size[0] //= 2
                return size[0]

        return original(function, starting_batch_size, reduce_batch_size_fn, *args, **kwargs)

    patch.wrap(accelerate.utils, "find_executable_batch_size", find)


@mutant(
    "find-batch-size-retries-any-error",
    "find_executable_batch_size retries with a smaller batch after ANY error, not only out-of-memory",
)
def find_batch_size_retries_any_error(patch):
    import accelerate.utils.memory

    patch.wrap(accelerate.utils.memory, "should_reduce_batch_size", lambda original, exception=None: True)


@mutant("find-batch-size-ignores-reduce-fn", "find_executable_batch_size ignores reduce_batch_size_fn and uses its default step")
def find_batch_size_ignores_reduce_fn(patch):
    import accelerate.utils

    def find(original, function=None, starting_batch_size=128, reduce_batch_size_fn=None, *args, **kwargs):
        return original(function, starting_batch_size, None, *args, **kwargs)

    patch.wrap(accelerate.utils, "find_executable_batch_size", find)


# --- prepared DataLoaders ---------------------------------------------------------------------------------


@mutant("prepare-gives-every-rank-all-batches", "prepare() leaves the DataLoader unsharded: every rank iterates all the data")
def prepare_gives_every_rank_all_batches(patch):
    import accelerate.accelerator

    def prepare_data_loader(original, *args, **kwargs):
        kwargs.update(num_processes=1, process_index=0)
        return original(*args, **kwargs)

    patch.wrap(accelerate.accelerator, "prepare_data_loader", prepare_data_loader)


@mutant(
    "gather-for-metrics-keeps-duplicates",
    "gather_for_metrics keeps the samples duplicated to pad the last round, like a plain gather",
)
def gather_for_metrics_keeps_duplicates(patch):
    from accelerate import Accelerator
    from accelerate.utils import gather_object, recursively_apply

    def gather_for_metrics(original, self, input_data, use_gather_object=False):
        try:  # tensors go through gather, anything else through gather_object, as the real one does
            recursively_apply(lambda x: x, input_data, error_on_other_type=True)
            all_tensors = True
        except TypeError:
            all_tensors = False
        if use_gather_object or not all_tensors:
            return gather_object(input_data)
        return self.gather(input_data)

    patch.wrap(Accelerator, "gather_for_metrics", gather_for_metrics)


@mutant(
    "prepare-skips-rng-sync",
    "a prepared DataLoader does not synchronise the ranks' random generators at each epoch",
)
def prepare_skips_rng_sync(patch):
    import accelerate.data_loader

    patch.wrap(accelerate.data_loader, "synchronize_rng_states", lambda original, *args, **kwargs: None)


@mutant("set-epoch-ignored", "set_epoch does not reach the seedable sampler: every epoch has the same order")
def set_epoch_ignored(patch):
    from accelerate.data_loader import SeedableRandomSampler

    patch.wrap(SeedableRandomSampler, "set_epoch", lambda original, self, epoch: None)


# --- set_seed ---------------------------------------------------------------------------------------------


def _wrap_set_seed(patch, replacement):
    """set_seed as snippets import it (accelerate.utils) and where Accelerate calls it from."""
    import accelerate.utils
    import accelerate.utils.random

    patch.wrap(accelerate.utils, "set_seed", replacement)
    patch.wrap(accelerate.utils.random, "set_seed", replacement)


@mutant("set-seed-leaves-python-random", "set_seed does not seed Python's random module")
def set_seed_leaves_python_random(patch):
    import random

    def set_seed(original, *args, **kwargs):
        state = random.getstate()
        original(*args, **kwargs)
        random.setstate(state)

    _wrap_set_seed(patch, set_seed)


@mutant("seedable-sampler-by-default",
        "DataLoaderConfiguration defaults to use_seedable_sampler=True, as transformers' Trainer sets it")
def seedable_sampler_by_default(patch):
    from accelerate.utils import DataLoaderConfiguration

    def init(original, self, *args, **kwargs):
        kwargs.setdefault("use_seedable_sampler", True)
        return original(self, *args, **kwargs)

    patch.wrap(DataLoaderConfiguration, "__init__", init)


@mutant("seedable-sampler-shares-rank0-seed",
        "with use_seedable_sampler=True Accelerate still synchronises the shuffling: every rank's SeedableRandomSampler "
        "takes rank 0's seed")
def seedable_sampler_shares_rank0_seed(patch):
    import torch.distributed as dist
    from accelerate.data_loader import SeedableRandomSampler

    def init(original, self, *args, **kwargs):
        original(self, *args, **kwargs)
        if dist.is_initialized():
            seed = [self.initial_seed]
            dist.broadcast_object_list(seed, src=0)
            self.initial_seed = seed[0]

    patch.wrap(SeedableRandomSampler, "__init__", init)


@mutant("set-seed-leaves-numpy-random", "set_seed does not seed NumPy's global generator (np.random)")
def set_seed_leaves_numpy_random(patch):
    import numpy as np

    def set_seed(original, *args, **kwargs):
        state = np.random.get_state()
        original(*args, **kwargs)
        np.random.set_state(state)

    _wrap_set_seed(patch, set_seed)


@mutant("set-seed-ignores-device-specific", "set_seed(seed, device_specific=True) seeds every rank with the same seed")
def set_seed_ignores_device_specific(patch):
    def set_seed(original, seed, device_specific=False, deterministic=False):
        return original(seed, False, deterministic)

    _wrap_set_seed(patch, set_seed)


# --- what accelerator.log records ---------------------------------------------------------------------------


@mutant(
    "accelerator-log-averages-over-processes",
    "accelerator.log averages every number over the processes before the main process logs it",
)
def accelerator_log_averages_over_processes(patch):
    from accelerate import Accelerator

    def log(original, self, values, step=None, log_kwargs=None):
        import torch  # every process calls log; the mean is taken before the main-process gate

        def mean(value):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return value
            return self.reduce(torch.tensor(float(value), device=self.device), "mean").item()

        return original(self, {key: mean(value) for key, value in values.items()}, step=step, log_kwargs=log_kwargs)

    patch.wrap(Accelerator, "log", log)


@mutant("accelerator-print-once-per-job", "accelerator.print prints on the main process of the whole job only, not once per node")
def accelerator_print_once_per_job(patch):
    from accelerate.state import PartialState

    def main_process_only(original, self, *args, **kwargs):
        if self.is_main_process:
            print(*args, **kwargs)

    patch.wrap(PartialState, "print", main_process_only)
