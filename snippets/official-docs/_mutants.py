"""Mutants for official-docs: a library that behaves the way Accelerate's (or torch's) docs say it does.

Each one is the world in which an erratum would not be one; the claim that proves the erratum must then fail.
"""

from verify.mutation import mutant


@mutant(
    "accelerate-reads-mixed-precision-variable",
    "Accelerate reads MIXED_PRECISION (as basic_tutorials/launch.md uses it) when ACCELERATE_MIXED_PRECISION is unset",
)
def accelerate_reads_mixed_precision_variable(patch):
    import os

    import accelerate.state

    def parse(original, key, default="no"):
        if key == "ACCELERATE_MIXED_PRECISION" and key not in os.environ and "MIXED_PRECISION" in os.environ:
            patch.ran()
            return os.environ["MIXED_PRECISION"]
        return original(key, default)

    patch.wrap(accelerate.state, "parse_choice_from_env", parse)


@mutant("accelerator-has-check-breakpoint", "Accelerator has the check_breakpoint() that set_trigger's docstring calls")
def accelerator_has_check_breakpoint(patch):
    from accelerate import Accelerator

    patch.replace(Accelerator, "check_breakpoint", Accelerator.check_trigger)


@mutant(
    "automatic-checkpoint-naming-on-by-default",
    "ProjectConfiguration turns automatic_checkpoint_naming on by default, so save_state() needs no folder",
)
def automatic_checkpoint_naming_on_by_default(patch):
    from accelerate.utils import ProjectConfiguration

    def init(original, self, *args, **kwargs):
        kwargs.setdefault("automatic_checkpoint_naming", True)
        original(self, *args, **kwargs)

    patch.wrap(ProjectConfiguration, "__init__", init)


@mutant(
    "checkpoint-folder-named-checkpointing",
    "save_state() with automatic naming writes project_dir/checkpointing/checkpoint_N, as checkpoint.md loads it",
)
def checkpoint_folder_named_checkpointing(patch):
    import os

    from accelerate import Accelerator

    def save_state(original, self, output_dir=None, *args, **kwargs):
        config = self.project_configuration
        if output_dir is not None or not config.automatic_checkpoint_naming:
            return original(self, output_dir, *args, **kwargs)
        folder = os.path.join(self.project_dir, "checkpointing", f"checkpoint_{config.iteration}")
        config.automatic_checkpoint_naming = False
        try:
            result = original(self, folder, *args, **kwargs)
        finally:
            config.automatic_checkpoint_naming = True
        config.iteration += 1
        return result

    patch.wrap(Accelerator, "save_state", save_state)


@mutant(
    "save-model-writes-pytorch-model-bin",
    "Accelerator.save_model writes pytorch_model.bin unless asked for safetensors (safe_serialization=False default)",
)
def save_model_writes_pytorch_model_bin(patch):
    from accelerate import Accelerator

    def save_model(original, self, model, save_directory, *args, **kwargs):
        if len(args) < 2:
            kwargs.setdefault("safe_serialization", False)
        return original(self, model, save_directory, *args, **kwargs)

    patch.wrap(Accelerator, "save_model", save_model)


@mutant(
    "scheduler-steps-on-every-micro-batch",
    "the prepared scheduler also steps on accumulating micro-batches, so a schedule sized in batches fits as is",
)
def scheduler_steps_on_every_micro_batch(patch):
    from accelerate.scheduler import AcceleratedScheduler
    from accelerate.state import AcceleratorState

    def step(original, self, *args, **kwargs):
        if self.step_with_optimizer and not self.gradient_state.sync_gradients:
            patch.ran()
            for _ in range(1 if self.split_batches else AcceleratorState().num_processes):
                self.scheduler.step(*args, **kwargs)
            return None
        return original(self, *args, **kwargs)

    patch.wrap(AcceleratedScheduler, "step", step)


@mutant(
    "accelerate-detects-fused-overflow",
    "AcceleratedOptimizer also flags a step as skipped when a fused optimizer skipped it inside its kernel",
)
def accelerate_detects_fused_overflow(patch):
    from accelerate.optimizer import AcceleratedOptimizer

    def step(original, self, *args, **kwargs):
        scaler = getattr(self, "scaler", None)
        before = scaler.get_scale() if scaler is not None else None
        result = original(self, *args, **kwargs)
        if scaler is not None and self.gradient_state.sync_gradients and scaler.get_scale() < before:
            self._is_overflow = True  # GradScaler.update lowers the scale only after an inf/NaN
        return result

    patch.wrap(AcceleratedOptimizer, "step", step)


@mutant(
    "allreduce-hook-divides-after-allreduce",
    "torch's allreduce_hook sums the gradients first and takes the mean in its then() callback, as its docstring says",
)
def allreduce_hook_divides_after_allreduce(patch):
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    def allreduce_fut(original, process_group, tensor):
        group = process_group if process_group is not None else dist.group.WORLD
        size = group.size()
        future = dist.all_reduce(tensor, group=group, async_op=True).get_future()
        return future.then(lambda fut: fut.value()[0].div_(size))

    patch.wrap(default_hooks, "_allreduce_fut", allreduce_fut)


@mutant(
    "ds-config-loader-tolerates-trailing-commas",
    "DeepSpeedPlugin(hf_ds_config=path) reads the file with a lenient parser that accepts trailing commas",
)
def ds_config_loader_tolerates_trailing_commas(patch):
    import os
    import re
    import tempfile

    from accelerate.utils.deepspeed import HfDeepSpeedConfig

    def init(original, self, config_file_or_dict):
        if isinstance(config_file_or_dict, str) and os.path.exists(config_file_or_dict):
            with open(config_file_or_dict) as f:
                text = re.sub(r",(\s*[}\]])", r"\1", f.read())
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                f.write(text)
            config_file_or_dict = f.name
        return original(self, config_file_or_dict)

    patch.wrap(HfDeepSpeedConfig, "__init__", init)


def _rename_keyword(patch, owner, name, documented, accepted):
    """Make owner.name accept the documented spelling of a keyword, as the docs call it."""

    def call(original, *args, **kwargs):
        if documented in kwargs:
            patch.ran()
            kwargs[accepted] = kwargs.pop(documented)
        return original(*args, **kwargs)

    patch.wrap(owner, name, call)


@mutant(
    "accelerator-accepts-kwarg-handlers", "Accelerator takes kwarg_handlers=, as low_precision_training.md spells it"
)
def accelerator_accepts_kwarg_handlers(patch):
    from accelerate import Accelerator

    _rename_keyword(patch, Accelerator, "__init__", "kwarg_handlers", "kwargs_handlers")


@mutant(
    "fp8-recipe-kwargs-accepts-optimization-level",
    "FP8RecipeKwargs takes optimization_level=, as low_precision_training.md spells it",
)
def fp8_recipe_kwargs_accepts_optimization_level(patch):
    from accelerate.utils import FP8RecipeKwargs

    _rename_keyword(patch, FP8RecipeKwargs, "__init__", "optimization_level", "opt_level")


@mutant(
    "fsdp-plugin-accepts-fsdp-prefixed-names",
    "FullyShardedDataParallelPlugin takes the config file's fsdp_-prefixed names (fsdp_auto_wrap_policy=)",
)
def fsdp_plugin_accepts_fsdp_prefixed_names(patch):
    from accelerate.utils import FullyShardedDataParallelPlugin

    _rename_keyword(patch, FullyShardedDataParallelPlugin, "__init__", "fsdp_auto_wrap_policy", "auto_wrap_policy")


@mutant(
    "on-local-process-accepts-local-process-idx",
    "Accelerator.on_local_process takes local_process_idx=, as execution.md spells it",
)
def on_local_process_accepts_local_process_idx(patch):
    from accelerate import Accelerator

    _rename_keyword(patch, Accelerator, "on_local_process", "local_process_idx", "local_process_index")


@mutant("accelerator-accepts-downcast-bf16", "Accelerator takes downcast_bf16=True, as training_tpu.md says")
def accelerator_accepts_downcast_bf16(patch):
    from accelerate import Accelerator

    def init(original, self, *args, downcast_bf16=None, **kwargs):
        if downcast_bf16 is not None:
            patch.ran()  # accepted; on a TPU it would set what ACCELERATE_DOWNCAST_BF16 sets, a no-op elsewhere
        return original(self, *args, **kwargs)

    patch.wrap(Accelerator, "__init__", init)


@mutant(
    "accelerator-accepts-kwarg-handler",
    "Accelerator takes kwarg_handler=, as the docstring of Accelerator.profile spells it",
)
def accelerator_accepts_kwarg_handler(patch):
    from accelerate import Accelerator

    _rename_keyword(patch, Accelerator, "__init__", "kwarg_handler", "kwargs_handlers")


@mutant(
    "accelerator-accepts-even-batches",
    "Accelerator still takes even_batches= directly, as the docstring of join_uneven_inputs passes it",
)
def accelerator_accepts_even_batches(patch):
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration

    def init(original, self, *args, even_batches=None, **kwargs):
        if even_batches is not None:
            patch.ran()
            kwargs.setdefault("dataloader_config", DataLoaderConfiguration(even_batches=even_batches))
        return original(self, *args, **kwargs)

    patch.wrap(Accelerator, "__init__", init)


@mutant(
    "notebook-launcher-sets-accelerate-mixed-precision",
    "notebook_launcher passes its mixed_precision to the workers as ACCELERATE_MIXED_PRECISION, the variable "
    "AcceleratorState reads (not as MIXED_PRECISION)",
)
def notebook_launcher_sets_accelerate_mixed_precision(patch):
    import accelerate.launchers

    def patch_environment(original, **kwargs):
        if "mixed_precision" in kwargs:
            patch.ran()
            kwargs["accelerate_mixed_precision"] = kwargs.pop("mixed_precision")
        return original(**kwargs)

    patch.wrap(accelerate.launchers, "patch_environment", patch_environment)
