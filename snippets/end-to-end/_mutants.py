"""Mutants for end-to-end: Accelerate's prepare / gather / broadcast / optimizer wrapper behaving the way a
wrong answer (or a plausible regression) would have them behave in a full training script.

Imports of torch and accelerate stay inside the functions: loading this catalogue costs nothing.
"""

from verify.mutation import mutant


@mutant(
    "dataloader-not-sharded",
    "prepare() does not shard the DataLoader: every process iterates the whole dataset",
)
def dataloader_not_sharded(patch):
    import accelerate.accelerator

    def unsharded(original, dataloader, *args, **kwargs):
        kwargs["num_processes"] = 1  # one shard: the whole dataset, on every process
        kwargs["process_index"] = 0
        return original(dataloader, *args, **kwargs)

    patch.wrap(accelerate.accelerator, "prepare_data_loader", unsharded)


@mutant(
    "gather-for-metrics-keeps-padding",
    "gather_for_metrics keeps the duplicated samples that padding added (it gathers like plain gather)",
)
def gather_for_metrics_keeps_padding(patch):
    from accelerate.accelerator import Accelerator

    def keep_everything(original, self, input_data, use_gather_object=False):
        return self.gather(input_data)

    patch.wrap(Accelerator, "gather_for_metrics", keep_everything)


@mutant(
    "broadcast-object-list-keeps-local",
    "accelerate.utils.broadcast_object_list leaves every process with its own objects (nothing is sent)",
)
def broadcast_object_list_keeps_local(patch):
    import accelerate.utils
    import accelerate.utils.operations

    def keep_local(original, object_list, from_process=0):
        return object_list

    patch.wrap(accelerate.utils.operations, "broadcast_object_list", keep_local)
    patch.wrap(accelerate.utils, "broadcast_object_list", keep_local)


@mutant(
    "accelerated-optimizer-never-steps",
    "the prepared optimizer's step() never reaches the wrapped torch optimizer (as if every step were skipped)",
)
def accelerated_optimizer_never_steps(patch):
    from accelerate.optimizer import AcceleratedOptimizer

    patch.wrap(AcceleratedOptimizer, "step", lambda original, self, closure=None: None)


@mutant(
    "prepare-skips-ddp-on-cpu",
    "prepare() does not wrap the model in DistributedDataParallel under MULTI_CPU (it returns the bare module)",
)
def prepare_skips_ddp_on_cpu(patch):
    from accelerate.accelerator import Accelerator
    from accelerate.utils import DistributedType

    def prepare_model(original, self, model, device_placement=None, evaluation_mode=False):
        if self.distributed_type == DistributedType.MULTI_CPU:
            evaluation_mode = True  # the branch that leaves the model unwrapped
        return original(self, model, device_placement=device_placement, evaluation_mode=evaluation_mode)

    patch.wrap(Accelerator, "prepare_model", prepare_model)


@mutant(
    "prepare-marks-inner-module-prepared",
    "prepare() marks the module inside the DDP wrapper as prepared, so a second prepare() of the original "
    "module hands it back unwrapped instead of wrapping it again",
)
def prepare_marks_inner_module_prepared(patch):
    from accelerate.accelerator import Accelerator

    def prepare_model(original, self, model, *args, **kwargs):
        result = original(self, model, *args, **kwargs)
        model._is_accelerate_prepared = True
        return result

    patch.wrap(Accelerator, "prepare_model", prepare_model)


@mutant(
    "ddp-wrapper-uses-inner-keys",
    "a DDP wrapper's state_dict and load_state_dict use the inner model's keys (no 'module.' prefix), so "
    "checkpoints move between the wrapper and the plain model unchanged",
)
def ddp_wrapper_uses_inner_keys(patch):
    from torch.nn.parallel import DistributedDataParallel

    patch.wrap(DistributedDataParallel, "state_dict",
               lambda original, self, *args, **kwargs: self.module.state_dict(*args, **kwargs))
    patch.wrap(DistributedDataParallel, "load_state_dict",
               lambda original, self, *args, **kwargs: self.module.load_state_dict(*args, **kwargs))


@mutant(
    "transformers-still-exports-adamw",
    "transformers still exports its own AdamW (as before its removal), so the handout's import works",
)
def transformers_still_exports_adamw(patch):
    import torch
    import transformers

    def adamw(*args, **kwargs):
        return torch.optim.AdamW(*args, **kwargs)

    patch.replace(transformers, "AdamW", adamw)
