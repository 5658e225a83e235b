"""Mutants for data-parallelism: DDP (and Accelerate's way of building it) behaving the way the wrong
answers on these pages say it does, or the way a plausible regression would make it behave.

Each mutant patches torch or accelerate in every rank for one snippet run; imports stay inside the
functions so that loading this catalogue costs nothing.
"""

from verify.mutation import mutant


def _ddp_reduction(patch, reduce_bucket):
    """Make every DDP model reduce its gradient buckets with `reduce_bucket(bucket_tensor, group)`, which
    returns a torch Future of the reduced tensor, in place of DDP's divide-by-world-size all-reduce.

    The built-in reduction lives in C++; the one Python door into it is a comm hook, so the mutant
    registers one when the DDP model is built. A snippet that registers a comm hook of its own (to count
    buckets, say) would then be refused ("can only be registered once"), so its hook is kept and called
    from ours; torch's reference allreduce_hook, which such hooks call, reduces the mutated way too.
    """
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel

    def reference_hook(process_group, bucket):  # stands in for allreduce_hook
        group = process_group if process_group is not None else dist.group.WORLD
        return reduce_bucket(bucket.buffer(), group)

    def init(original, self, *args, **kwargs):
        original(self, *args, **kwargs)
        user = []  # the (hook, state) a snippet registers later, if any

        def dispatch(state, bucket):
            if user:
                hook, user_state = user[0]
                return hook(user_state, bucket)
            return reduce_bucket(bucket.buffer(), self.process_group)

        self._mutant_user_hook = user
        real_register(self, None, dispatch)

    def register(original, self, state, hook):
        if hasattr(self, "_mutant_user_hook"):
            self._check_comm_hook(hook)
            self._mutant_user_hook[:] = [(hook, state)]
            return None
        return original(self, state, hook)

    real_register = DistributedDataParallel.register_comm_hook  # for init(), before it is wrapped
    patch.wrap(DistributedDataParallel, "__init__", init)
    patch.wrap(DistributedDataParallel, "register_comm_hook", register)
    patch.wrap(default_hooks, "allreduce_hook", lambda original, state, bucket: reference_hook(state, bucket))


@mutant("ddp-sums-gradients", "DDP sums the gradients across ranks instead of averaging them")
def ddp_sums_gradients(patch):
    import torch.distributed as dist

    def summed(tensor, group):
        fut = dist.all_reduce(tensor, group=group, async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])  # no division by the world size

    _ddp_reduction(patch, summed)


@mutant(
    "ddp-reduces-to-rank0",
    "DDP reduces the gradients onto one designated device (rank 0) instead of all-reducing them: the other "
    "ranks keep their own local gradients",
)
def ddp_reduces_to_rank0(patch):
    import torch.distributed as dist

    def to_rank0(tensor, group):
        world = dist.get_world_size(group)
        local = tensor.clone()  # with a comm hook the bucket holds this rank's undivided gradient
        fut = dist.reduce(tensor, dst=0, group=group, async_op=True).get_future()

        def result(_):
            if dist.get_rank() == 0:
                return tensor.div_(world)  # the designated device gets the average
            return local  # the other ranks keep what they computed

        return fut.then(result)

    _ddp_reduction(patch, to_rank0)


@mutant("ddp-skips-allreduce", "DDP never all-reduces: every backward behaves as if inside no_sync()")
def ddp_skips_allreduce(patch):
    from torch.nn.parallel import DistributedDataParallel

    def forward(original, self, *args, **kwargs):
        self.require_backward_grad_sync = False  # what no_sync() sets; DDP then arms no all-reduce
        return original(self, *args, **kwargs)

    patch.wrap(DistributedDataParallel, "forward", forward)


@mutant(
    "ddp-broadcasts-params-every-step",
    "a designated device shares the updated parameters: DDP re-broadcasts rank 0's weights before every "
    "forward",
)
def ddp_broadcasts_params_every_step(patch):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    def forward(original, self, *args, **kwargs):
        if torch.is_grad_enabled():
            with torch.no_grad():
                for parameter in self.module.parameters():
                    dist.broadcast(parameter.data, src=0, group=self.process_group)
        return original(self, *args, **kwargs)

    patch.wrap(DistributedDataParallel, "forward", forward)


@mutant(
    "ddp-broadcasts-nothing-at-init",
    "DDP does not broadcast rank 0's parameters and buffers when it is constructed (_sync_module_states "
    "does nothing)",
)
def ddp_broadcasts_nothing_at_init(patch):
    import torch.nn.parallel.distributed as ddp_module

    patch.replace(ddp_module, "_sync_module_states", lambda *args, **kwargs: None)


@mutant(
    "ddp-never-syncs-buffers",
    "DDP never broadcasts buffers before forward (as if forward_sync_buffers=False were the default)",
)
def ddp_never_syncs_buffers(patch):
    from torch.nn.parallel import DistributedDataParallel

    def init(original, self, *args, **kwargs):
        kwargs.pop("broadcast_buffers", None)
        kwargs["forward_sync_buffers"] = False
        return original(self, *args, **kwargs)

    patch.wrap(DistributedDataParallel, "__init__", init)


@mutant(
    "ddp-kwargs-not-passed",
    "Accelerate drops the options of DistributedDataParallelKwargs (bucket_cap_mb, find_unused_parameters, "
    "static_graph, gradient_as_bucket_view ...) instead of passing them to DistributedDataParallel",
)
def ddp_kwargs_not_passed(patch):
    from accelerate.utils import DistributedDataParallelKwargs

    patch.wrap(DistributedDataParallelKwargs, "to_kwargs", lambda original, self: {})


@mutant(
    "ddp-allreduces-after-backward",
    "DDP all-reduces all gradients at once after backward has finished (one bucket, nothing overlaps)",
)
def ddp_allreduces_after_backward(patch):
    from torch.nn.parallel import DistributedDataParallel

    def init(original, self, *args, **kwargs):
        kwargs["bucket_cap_mb"] = 1024 * 1024  # every gradient in one bucket: complete only at the end
        return original(self, *args, **kwargs)

    patch.wrap(DistributedDataParallel, "__init__", init)


@mutant(
    "ddp-finds-unused-parameters-by-default",
    "DDP searches the graph for unused parameters by default (find_unused_parameters=True always)",
)
def ddp_finds_unused_parameters_by_default(patch):
    from torch.nn.parallel import DistributedDataParallel

    def init(original, self, *args, **kwargs):
        kwargs["find_unused_parameters"] = True
        return original(self, *args, **kwargs)

    patch.wrap(DistributedDataParallel, "__init__", init)


@mutant(
    "ddp-ignores-gradient-as-bucket-view",
    "DDP ignores gradient_as_bucket_view=True: gradients stay separate tensors, copied to and from buckets",
)
def ddp_ignores_gradient_as_bucket_view(patch):
    from torch.nn.parallel import DistributedDataParallel

    def init(original, self, *args, **kwargs):
        kwargs["gradient_as_bucket_view"] = False
        return original(self, *args, **kwargs)

    patch.wrap(DistributedDataParallel, "__init__", init)


@mutant("ddp-ignores-static-graph", "DDP ignores static_graph=True and treats the graph as dynamic")
def ddp_ignores_static_graph(patch):
    from torch.nn.parallel import DistributedDataParallel

    def init(original, self, *args, **kwargs):
        kwargs["static_graph"] = False
        return original(self, *args, **kwargs)

    patch.wrap(DistributedDataParallel, "__init__", init)


@mutant(
    "ddp-makes-batchnorm-global",
    "DDP averages the gradients, so BatchNorm is automatically global: DDP normalises every BatchNorm with "
    "statistics over all ranks",
)
def ddp_makes_batchnorm_global(patch):
    import torch
    import torch.distributed.nn.functional as dist_nn
    from torch.nn.modules.batchnorm import _BatchNorm
    from torch.nn.parallel import DistributedDataParallel

    def synced(module, x):
        if not module.training:
            return _BatchNorm.forward(module, x)
        count = dist_nn.all_reduce(torch.tensor([float(x.shape[0])]))
        mean = dist_nn.all_reduce(x.sum(0)) / count
        var = dist_nn.all_reduce(((x - mean) ** 2).sum(0)) / count
        return (x - mean) / torch.sqrt(var + module.eps) * module.weight + module.bias

    def init(original, self, module, *args, **kwargs):
        for layer in module.modules():
            if isinstance(layer, _BatchNorm) and type(layer).forward is _BatchNorm.forward:
                layer.forward = synced.__get__(layer)
        return original(self, module, *args, **kwargs)

    patch.wrap(DistributedDataParallel, "__init__", init)


@mutant(
    "syncbn-accepts-cpu",
    "DDP accepts SyncBatchNorm on CPU modules (no 'only work with GPU modules' check)",
)
def syncbn_accepts_cpu(patch):
    from torch.nn.parallel import DistributedDataParallel

    patch.wrap(DistributedDataParallel, "_passing_sync_batchnorm_handle", lambda original, self, module: None)


@mutant(
    "convert-sync-batchnorm-not-recursive",
    "convert_sync_batchnorm converts only the module it is given, not the BatchNorm layers inside it",
)
def convert_sync_batchnorm_not_recursive(patch):
    import torch
    from torch.nn.modules.batchnorm import _BatchNorm

    original = torch.nn.SyncBatchNorm.convert_sync_batchnorm

    def top_level_only(cls, module, process_group=None):
        patch.ran()
        if isinstance(module, _BatchNorm):
            return original(module, process_group)
        return module

    patch.replace(torch.nn.SyncBatchNorm, "convert_sync_batchnorm", classmethod(top_level_only))


@mutant(
    "parallel-apply-runs-on-cpu",
    "DataParallel's parallel_apply runs replicas on CPU too (threads without device streams) instead of "
    "requiring an accelerator",
)
def parallel_apply_runs_on_cpu(patch):
    import importlib
    import threading

    import torch.nn.parallel

    # the module, not the function of the same name that torch.nn.parallel exports
    parallel_apply_module = importlib.import_module("torch.nn.parallel.parallel_apply")

    def cpu_parallel_apply(original, modules, inputs, kwargs_tup=None, devices=None):
        outputs = [None] * len(modules)
        kwargs_tup = kwargs_tup or ({},) * len(modules)

        def run(i):
            args = inputs[i] if isinstance(inputs[i], (list, tuple)) else (inputs[i],)
            outputs[i] = modules[i](*args, **kwargs_tup[i])

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(modules))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return outputs

    patch.wrap(torch.nn.parallel, "parallel_apply", cpu_parallel_apply)
    patch.wrap(parallel_apply_module, "parallel_apply", cpu_parallel_apply)


@mutant(
    "ddp-shards-optimizer-state",
    "data parallelism already shards the optimizer: Accelerate's prepare() gives each rank only its share "
    "of the optimizer (ZeroRedundancyOptimizer) instead of a full replica",
)
def ddp_shards_optimizer_state(patch):
    from accelerate.accelerator import Accelerator

    def prepare_optimizer(original, self, optimizer, device_placement=None):
        from torch.distributed.optim import ZeroRedundancyOptimizer

        if self.num_processes > 1 and not isinstance(optimizer, ZeroRedundancyOptimizer):
            params = [p for group in optimizer.param_groups for p in group["params"]]
            sharded = ZeroRedundancyOptimizer(params, optimizer_class=type(optimizer), **optimizer.defaults)
            sharded.state = sharded.optim.state  # what each rank keeps: its own share
            # (its state_dict() needs a consolidation first, so no device placement round trip)
            return original(self, sharded, device_placement=False)
        return original(self, optimizer, device_placement=device_placement)

    patch.wrap(Accelerator, "prepare_optimizer", prepare_optimizer)


@mutant("no-sync-still-allreduces", "DDP's no_sync() changes nothing: backward inside it still all-reduces")
def no_sync_still_allreduces(patch):
    import contextlib

    from torch.nn.parallel import DistributedDataParallel

    patch.wrap(DistributedDataParallel, "no_sync", lambda original, self: contextlib.nullcontext())


@mutant(
    "ddp-buckets-follow-parameter-order",
    "DDP fills its gradient buckets in the order of model.parameters() (bucket 0 holds the first layer "
    "defined) and never rebuilds them from the order backward produces gradients",
)
def ddp_buckets_follow_parameter_order(patch):
    import torch.distributed as dist

    class ParameterOrderReducer(dist.Reducer):
        def __init__(self, parameters, bucket_indices, per_bucket_size_limits, *args, **kwargs):
            # DDP hands the buckets over reversed (last layer defined first); undo that
            patch.ran()
            super().__init__(parameters, list(reversed(bucket_indices)), list(reversed(per_bucket_size_limits)),
                             *args, **kwargs)  # fmt: skip

        def _rebuild_buckets(self):  # never re-bucket from the order gradients were ready
            return False

    patch.replace(dist, "Reducer", ParameterOrderReducer)


@mutant(
    "ddp-bucket-view-changes-gradients",
    "gradient_as_bucket_view=True changes the gradient values: DDP's built-in reduction of bucket-view "
    "gradients sums them over the ranks instead of averaging them (the default, copying path still averages)",
)
def ddp_bucket_view_changes_gradients(patch):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    def summed(group, bucket):  # all-reduce without the division by the world size
        fut = dist.all_reduce(bucket.buffer(), group=group, async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])

    def init(original, self, *args, **kwargs):
        original(self, *args, **kwargs)
        if not self.gradient_as_bucket_view:
            return
        # The built-in reduction lives in C++; its Python door is a comm hook. A hook the snippet
        # registers later (one that records the bucket buffers, say) is kept and called instead, as DDP
        # would run it in place of its built-in reduction.
        user = []

        def dispatch(state, bucket):
            if user:
                hook, user_state = user[0]
                return hook(user_state, bucket)
            return summed(self.process_group, bucket)

        self._mutant_bucket_view_hook = user
        real_register(self, None, dispatch)

    def register(original, self, state, hook):
        if hasattr(self, "_mutant_bucket_view_hook"):
            self._check_comm_hook(hook)
            self._mutant_bucket_view_hook[:] = [(hook, state)]
            return None
        return original(self, state, hook)

    real_register = DistributedDataParallel.register_comm_hook  # for init(), before it is wrapped
    patch.wrap(DistributedDataParallel, "__init__", init)
    patch.wrap(DistributedDataParallel, "register_comm_hook", register)


@mutant(
    "ddp-ignored-outputs-expect-gradients",
    "find_unused_parameters=True only covers parameters forward never touches: DDP does not route its outputs "
    "through _DDPSink, so a returned output that the loss ignores leaves its parameters waiting for a gradient",
)
def ddp_ignored_outputs_expect_gradients(patch):
    from torch.nn.parallel.distributed import _DDPSink

    # Function.apply is a classmethod: the wrapper receives the class, then DDP's weakref, then the outputs.
    patch.wrap(_DDPSink, "apply", lambda original, cls, ddp_weakref, *outputs: outputs)


@mutant(
    "convert-sync-batchnorm-fresh-weights",
    "convert_sync_batchnorm swaps in SyncBatchNorm layers with freshly initialised weight and bias instead of "
    "keeping the BatchNorm's own",
)
def convert_sync_batchnorm_fresh_weights(patch):
    import torch

    def fresh(original, cls, module, process_group=None):
        converted = original(cls, module, process_group)
        for layer in converted.modules():
            if isinstance(layer, torch.nn.SyncBatchNorm) and layer.affine:
                patch.ran()
                layer.weight = torch.nn.Parameter(torch.ones_like(layer.weight))
                layer.bias = torch.nn.Parameter(torch.zeros_like(layer.bias))
        return converted

    patch.wrap(torch.nn.SyncBatchNorm, "convert_sync_batchnorm", fresh)
