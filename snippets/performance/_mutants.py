"""Mutants for the performance pages: the library behaving the way the wrong answers say."""

from verify.mutation import mutant


@mutant("prepare-ignores-dynamo-plugin", "prepare() leaves the model uncompiled although a dynamo backend is set")
def prepare_ignores_dynamo_plugin(patch):
    from accelerate import Accelerator
    from accelerate.utils import DynamoBackend

    def uncompiled(original, self, *args, **kwargs):
        plugin = self.state.dynamo_plugin
        backend, plugin.backend = plugin.backend, DynamoBackend.NO
        try:
            return original(self, *args, **kwargs)
        finally:
            plugin.backend = backend

    patch.wrap(Accelerator, "prepare_model", uncompiled)


@mutant("regional-compilation-compiles-whole-model",
        "use_regional_compilation is ignored: prepare() compiles the whole model as one graph")
def regional_compilation_compiles_whole_model(patch):
    import accelerate.accelerator
    import torch

    def whole(original, model, **compile_kwargs):
        return torch.compile(model, **compile_kwargs)

    patch.wrap(accelerate.accelerator, "compile_regions", whole)


@mutant("prepare-drops-dataloader-workers",
        "prepare() rebuilds the DataLoader without its num_workers: every rank loads its batches in the main process")
def prepare_drops_dataloader_workers(patch):
    import accelerate.accelerator

    def no_workers(original, *args, **kwargs):
        loader = original(*args, **kwargs)
        getattr(loader, "base_dataloader", loader).num_workers = 0  # the torch DataLoader that iterates
        return loader

    patch.wrap(accelerate.accelerator, "prepare_data_loader", no_workers)


@mutant("prepare-divides-workers-among-ranks",
        "prepare() treats num_workers as the job's total and gives each rank num_workers // num_processes of them")
def prepare_divides_workers_among_ranks(patch):
    import accelerate.accelerator
    from accelerate import PartialState

    def divided(original, *args, **kwargs):
        loader = original(*args, **kwargs)
        base = getattr(loader, "base_dataloader", loader)  # the torch DataLoader that iterates
        base.num_workers = max(1, base.num_workers // PartialState().num_processes) if base.num_workers else 0
        return loader

    patch.wrap(accelerate.accelerator, "prepare_data_loader", divided)


# --- the GPU timing page (performance/cuda-async-timing) ---------------------------------------------------
@mutant("cuda-synchronize-is-a-no-op", "torch.cuda.synchronize() returns at once, without waiting for queued kernels")
def cuda_synchronize_is_a_no_op(patch):
    import torch

    patch.wrap(torch.cuda, "synchronize", lambda original, device=None: None)
