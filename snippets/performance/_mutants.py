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


@mutant("each-accelerator-sets-its-dynamo-backend",
        "every Accelerator(dynamo_backend=...) replaces the shared state's dynamo plugin, even when an Accelerator "
        "already exists in the process")
def each_accelerator_sets_its_dynamo_backend(patch):
    from accelerate import Accelerator
    from accelerate.utils import TorchDynamoPlugin

    def init(original, self, *args, **kwargs):
        original(self, *args, **kwargs)
        if kwargs.get("dynamo_backend") is not None:
            self.state.dynamo_plugin = TorchDynamoPlugin(backend=kwargs["dynamo_backend"])

    patch.wrap(Accelerator, "__init__", init)


@mutant("prepare-compiles-before-ddp",
        "prepare() compiles the model itself and then wraps it in DDP (DDP(torch.compile(model))), so a model "
        "whose top module is a torch.nn container is compiled too")
def prepare_compiles_before_ddp(patch):
    import torch
    from accelerate import Accelerator
    from accelerate.utils import DynamoBackend

    def prepare_model(original, self, model, *args, **kwargs):
        plugin = self.state.dynamo_plugin
        if plugin.backend != DynamoBackend.NO and not isinstance(model, torch._dynamo.eval_frame.OptimizedModule):
            model = torch.compile(model, **plugin.to_kwargs())
        return original(self, model, *args, **kwargs)

    patch.wrap(Accelerator, "prepare_model", prepare_model)


# --- numa-cpu-affinity (pages-a) -----------------------------------------------------------------
@mutant("accelerate-launch-leaves-omp-unset",
        "accelerate launch leaves OMP_NUM_THREADS alone (only torchrun sets it), so each rank uses every core")
def accelerate_launch_leaves_omp_unset(patch):
    import accelerate.utils.launch

    def without_omp(original, *args, **kwargs):
        environment = original(*args, **kwargs)
        environment.pop("OMP_NUM_THREADS", None)
        return environment

    patch.wrap(accelerate.utils.launch, "prepare_multi_gpu_env", without_omp)


@mutant("accelerate-affinity-ignores-local-rank",
        "--enable_cpu_affinity binds every process to the CPUs of GPU 0 instead of those of its own GPU")
def accelerate_affinity_ignores_local_rank(patch):
    import accelerate.utils.environment

    def gpu_zero(original, local_process_index, verbose=None):
        return original(0, verbose=verbose)

    patch.wrap(accelerate.utils.environment, "override_numa_affinity", gpu_zero)


# --- the GPU timing page (performance/cuda-async-timing) ---------------------------------------------------
@mutant("cuda-synchronize-is-a-no-op", "torch.cuda.synchronize() returns at once, without waiting for queued kernels")
def cuda_synchronize_is_a_no_op(patch):
    import torch

    patch.wrap(torch.cuda, "synchronize", lambda original, device=None: None)


@mutant(
    "row-parallel-all-reduces-weight-sized-buffer",
    "a row-parallel Linear communicates per parameter, as DP does: it all-reduces a buffer the size of its "
    "weight instead of its output activation, so its forward traffic no longer follows the tokens",
)
def row_parallel_all_reduces_weight_sized_buffer(patch):
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor.parallel import RowwiseParallel

    def per_parameter(original, output_layouts, use_local_output, mod, outputs, device_mesh):
        dist.all_reduce(torch.zeros(mod.weight.shape, dtype=outputs.dtype), group=device_mesh.get_group())
        return outputs.to_local()  # the activation's partial sum is never reduced

    patch.wrap(RowwiseParallel, "_prepare_output_fn", per_parameter)
