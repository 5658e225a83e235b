"""Mutants for sharded-training: the library bugs that the wrong answers on these pages describe.

Each patches torch or accelerate where the snippets' calls resolve (see /work/wt/MUTANTS-SPEC.md).
"""

from verify.mutation import mutant

# --- FSDP2 (torch.distributed.fsdp.fully_shard) ------------------------------------------------------


@mutant("fully-shard-keeps-full-params", "fully_shard leaves every parameter whole on every rank (nothing is sharded)")
def fully_shard_keeps_full_params(patch):
    import torch.distributed.fsdp as fsdp

    patch.wrap(fsdp, "fully_shard", lambda original, module, *args, **kwargs: module)


@mutant(
    "fsdp-keeps-params-after-forward",
    "fully_shard ignores reshard_after_forward=True: parameters stay gathered from forward to backward",
)
def fsdp_keeps_params_after_forward(patch):
    import torch.distributed.fsdp as fsdp

    def fully_shard(original, module, *args, **kwargs):
        kwargs["reshard_after_forward"] = False
        return original(module, *args, **kwargs)

    patch.wrap(fsdp, "fully_shard", fully_shard)


@mutant(
    "fully-shard-keeps-params-by-default",
    "fully_shard keeps a unit's parameters gathered from forward to backward unless reshard_after_forward=True "
    "is passed",
)
def fully_shard_keeps_params_by_default(patch):
    import torch.distributed.fsdp as fsdp

    def fully_shard(original, module, *args, **kwargs):
        return original(module, *args, **{"reshard_after_forward": False, **kwargs})

    patch.wrap(fsdp, "fully_shard", fully_shard)


@mutant(
    "fully-shard-reshards-root-by-default",
    "fully_shard frees a root unit's parameters after forward unless told otherwise (reshard_after_forward "
    "defaults to True for every unit)",
)
def fully_shard_reshards_root_by_default(patch):
    import torch.distributed.fsdp as fsdp

    def fully_shard(original, module, *args, **kwargs):
        return original(module, *args, **{"reshard_after_forward": True, **kwargs})

    patch.wrap(fsdp, "fully_shard", fully_shard)


@mutant(
    "fsdp-reshards-regardless",
    "fully_shard ignores reshard_after_forward=False: parameters are freed after forward and gathered again",
)
def fsdp_reshards_regardless(patch):
    import torch.distributed.fsdp as fsdp

    def fully_shard(original, module, *args, **kwargs):
        kwargs["reshard_after_forward"] = True
        return original(module, *args, **kwargs)

    patch.wrap(fsdp, "fully_shard", fully_shard)


@mutant("fsdp-ignores-mp-policy", "fully_shard drops its MixedPrecisionPolicy: forward runs on the fp32 parameters")
def fsdp_ignores_mp_policy(patch):
    import torch.distributed.fsdp as fsdp

    def fully_shard(original, module, *args, **kwargs):
        kwargs.pop("mp_policy", None)
        return original(module, *args, **kwargs)

    patch.wrap(fsdp, "fully_shard", fully_shard)


@mutant(
    "fsdp-shards-params-in-compute-dtype",
    "fully_shard stores the sharded parameters in the policy's param_dtype (bf16), so there is no fp32 master copy",
)
def fsdp_shards_params_in_compute_dtype(patch):
    import torch.distributed.fsdp as fsdp
    from torch.distributed.tensor import DTensor

    def fully_shard(original, module, *args, **kwargs):
        policy = kwargs.get("mp_policy")
        dtype = getattr(policy, "param_dtype", None)
        if dtype is not None and not any(isinstance(p, DTensor) for p in module.parameters()):
            module.to(dtype)
        return original(module, *args, **kwargs)

    patch.wrap(fsdp, "fully_shard", fully_shard)


@mutant(
    "fsdp-hsdp-mesh-flattened",
    "fully_shard on a 2-D (replicate, shard) mesh shards over all its ranks instead of replicating across groups",
)
def fsdp_hsdp_mesh_flattened(patch):
    import torch.distributed.fsdp as fsdp

    def fully_shard(original, module, *args, **kwargs):
        mesh = kwargs.get("mesh")
        if mesh is not None and mesh.ndim == 2 and mesh.size(0) > 1:
            kwargs["mesh"] = mesh._flatten()
        return original(module, *args, **kwargs)

    patch.wrap(fsdp, "fully_shard", fully_shard)


@mutant(
    "fsdp-no-sync-ignored",
    "FSDP2's set_requires_gradient_sync(False) is ignored: every micro-batch is reduce-scattered",
)
def fsdp_no_sync_ignored(patch):
    from torch.distributed.fsdp import FSDPModule

    def set_requires_gradient_sync(original, self, requires_gradient_sync, *args, **kwargs):
        return original(self, True, *args, **kwargs)

    patch.wrap(FSDPModule, "set_requires_gradient_sync", set_requires_gradient_sync)


# --- reduce-scatter (FSDP2's default ReduceScatter and the written-out ZeRO-2 call it) ----------------


def _completed(work):
    if work is not None:
        work.wait()
    return work


@mutant(
    "reduce-scatter-keeps-local-slice",
    "reduce-scatter hands each rank its OWN slice of its own gradient, not the sum over the ranks",
)
def reduce_scatter_keeps_local_slice(patch):
    import torch
    import torch.distributed as dist

    def reduce_scatter_single(original, output, input, *args, **kwargs):
        scratch = torch.empty_like(output)
        work = _completed(original(scratch, input, *args, **kwargs))  # the collective still matches up
        rank, world = dist.get_rank(), dist.get_world_size()
        output.copy_(input.reshape(world, -1)[rank].reshape(output.shape))
        return work

    patch.wrap(dist, "reduce_scatter_single", reduce_scatter_single)


@mutant("fsdp-sums-gradients", "the reduce-scatter of gradients leaves the SUM over the ranks, not the average")
def fsdp_sums_gradients(patch):
    import torch.distributed as dist

    def reduce_scatter_single(original, output, input, *args, **kwargs):
        work = _completed(original(output, input, *args, **kwargs))
        output.mul_(dist.get_world_size())
        return work

    patch.wrap(dist, "reduce_scatter_single", reduce_scatter_single)


@mutant(
    "reduce-scatter-via-all-reduce",
    "FSDP2's reduce-scatter is done as a full all-reduce, each rank then keeping its slice (DDP's traffic)",
)
def reduce_scatter_via_all_reduce(patch):
    import torch.distributed as dist

    def reduce_scatter_single(original, output, input, op=dist.ReduceOp.SUM, group=None, async_op=False):
        patch.ran()
        full = input.clone()
        _completed(dist.all_reduce(full, op=op, group=group, async_op=async_op))  # looked up at call time
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        output.copy_(full.reshape(world, -1)[rank].reshape(output.shape))
        return _completed(dist.barrier(group=group, async_op=True)) if async_op else None

    patch.wrap(dist, "reduce_scatter_single", reduce_scatter_single)


# --- DDP and torch's ZeroRedundancyOptimizer ---------------------------------------------------------


@mutant(
    "ddp-gradients-are-bucket-views",
    "DDP makes the .grad tensors views into its buckets by default (gradient_as_bucket_view=True), so nothing is held twice",
)
def ddp_gradients_are_bucket_views(patch):
    from torch.nn.parallel import DistributedDataParallel

    def init(original, self, *args, **kwargs):
        kwargs["gradient_as_bucket_view"] = True
        return original(self, *args, **kwargs)

    patch.wrap(DistributedDataParallel, "__init__", init)


@mutant(
    "zero-optimizer-keeps-full-state",
    "ZeroRedundancyOptimizer's local optimizer covers every parameter, so each rank keeps the whole Adam state",
)
def zero_optimizer_keeps_full_state(patch):
    from torch.distributed.optim import ZeroRedundancyOptimizer

    def init_local_optimizer(original, self):
        original(self)
        everything = [p for group in self.param_groups for p in group["params"]]
        self.optim = self._optim_constructor(everything, **self._optim_defaults)

    patch.wrap(ZeroRedundancyOptimizer, "_init_local_optimizer", init_local_optimizer)


@mutant(
    "zero-optimizer-skips-broadcast",
    "ZeroRedundancyOptimizer never broadcasts the parameters a rank updated, so the others keep stale copies",
)
def zero_optimizer_skips_broadcast(patch):
    from torch.distributed.optim import ZeroRedundancyOptimizer

    patch.wrap(ZeroRedundancyOptimizer, "_sync_params", lambda original, self: None)


# --- Accelerate's DeepSpeed config ("auto" values) ---------------------------------------------------


@mutant(
    "deepspeed-plugin-writes-micro-batch-1",
    "DeepSpeedPlugin without a config file writes a micro batch of 1 (and its train batch) instead of \"auto\"",
)
def deepspeed_plugin_writes_micro_batch_1(patch):
    import os

    from accelerate.utils import DeepSpeedPlugin

    def post_init(original, self):
        from_arguments = self.hf_ds_config is None and "ACCELERATE_DEEPSPEED_CONFIG_FILE" not in os.environ
        original(self)
        if from_arguments:  # the config the plugin writes itself
            self.deepspeed_config["train_micro_batch_size_per_gpu"] = 1
            self.deepspeed_config["train_batch_size"] = "auto"

    patch.wrap(DeepSpeedPlugin, "__post_init__", post_init)


@mutant(
    "deepspeed-auto-left-for-deepspeed",
    "prepare() leaves the \"auto\" entries in the DeepSpeed config for DeepSpeed to pick",
)
def deepspeed_auto_left_for_deepspeed(patch):
    from accelerate.utils import DeepSpeedPlugin

    patch.wrap(DeepSpeedPlugin, "deepspeed_config_process", lambda original, self, *args, **kwargs: None)


@mutant(
    "deepspeed-auto-batch-ignores-world-size",
    "the \"auto\" train_batch_size is filled as micro batch x accumulation steps, without the number of processes",
)
def deepspeed_auto_batch_ignores_world_size(patch):
    from accelerate.utils import DeepSpeedPlugin

    def process(original, self, *args, **kwargs):
        if "train_batch_size" in kwargs and "train_micro_batch_size_per_gpu" in kwargs:
            kwargs["train_batch_size"] = kwargs["train_micro_batch_size_per_gpu"] * self.get_value(
                "gradient_accumulation_steps"
            )
        return original(self, *args, **kwargs)

    patch.wrap(DeepSpeedPlugin, "deepspeed_config_process", process)


@mutant(
    "deepspeed-micro-batch-from-largest-loader",
    "with several DataLoaders in prepare(), the \"auto\" micro batch comes from the largest batch size",
)
def deepspeed_micro_batch_from_largest_loader(patch):
    from accelerate.utils import DeepSpeedPlugin

    def post_init(original, self):
        original(self)
        self.is_train_batch_min = False

    patch.wrap(DeepSpeedPlugin, "__post_init__", post_init)


@mutant(
    "deepspeed-loader-batch-overrides-config",
    "the DataLoader's batch size replaces the config's train_micro_batch_size_per_gpu even where it is a number",
)
def deepspeed_loader_batch_overrides_config(patch):
    from accelerate.utils import DeepSpeedPlugin

    key = "train_micro_batch_size_per_gpu"

    def is_auto(original, self, ds_key_long):
        return True if ds_key_long == key else original(self, ds_key_long)

    def fill_match(original, self, ds_key_long, *args, **kwargs):
        if ds_key_long == key and key in kwargs:
            config, ds_key = self.hf_ds_config.find_config_node(ds_key_long)
            if config is not None:
                config[ds_key] = kwargs[key]
                return None
        return original(self, ds_key_long, *args, **kwargs)

    patch.wrap(DeepSpeedPlugin, "is_auto", is_auto)
    patch.wrap(DeepSpeedPlugin, "fill_match", fill_match)


@mutant("deepspeed-default-stage-3", "DeepSpeedPlugin defaults to ZeRO stage 3 when no stage is given")
def deepspeed_default_stage_3(patch):
    from accelerate.utils import DeepSpeedPlugin

    def post_init(original, self):
        if self.zero_stage is None:
            self.zero_stage = 3
        original(self)

    patch.wrap(DeepSpeedPlugin, "__post_init__", post_init)


# --- Accelerate's FSDP on CPU -------------------------------------------------------------------------


@mutant(
    "accelerate-warns-fsdp-ignored-on-cpu",
    "Accelerate warns that FSDP is ignored when it falls back to DDP on CPU",
)
def accelerate_warns_fsdp_ignored_on_cpu(patch):
    import os
    import warnings

    from accelerate import Accelerator

    def init(original, self, *args, **kwargs):
        original(self, *args, **kwargs)
        asked = kwargs.get("fsdp_plugin") is not None or os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true"
        if asked and str(self.distributed_type).endswith("MULTI_CPU"):
            warnings.warn("FSDP was requested but is not supported on CPU: falling back to DDP")

    patch.wrap(Accelerator, "__init__", init)


@mutant(
    "accelerate-fsdp1-sync-states-off-by-default",
    "FullyShardedDataParallelPlugin reads FSDP_SYNC_MODULE_STATES as false, so FSDP1 on CPU never looks for a device",
)
def accelerate_fsdp1_sync_states_off_by_default(patch):
    from accelerate.utils import FullyShardedDataParallelPlugin

    def post_init(original, self):
        if self.sync_module_states is None:
            self.sync_module_states = False
        if self.cpu_ram_efficient_loading is None:
            self.cpu_ram_efficient_loading = False
        original(self)

    patch.wrap(FullyShardedDataParallelPlugin, "__post_init__", post_init)


# --- torch.distributed.checkpoint ---------------------------------------------------------------------


@mutant(
    "full-state-dict-not-gathered",
    "a full state dict holds this rank's rows only, zeros where the other ranks' shards belong",
)
def full_state_dict_not_gathered(patch):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint.state_dict as state_dict_module
    from torch.distributed.tensor import DTensor

    def gather(original, state_dict, *args, **kwargs):
        result = {}
        for key, value in state_dict.items():
            if isinstance(value, DTensor):
                local = value.to_local()
                full = torch.zeros(value.shape, dtype=value.dtype)
                rows = -(-value.shape[0] // dist.get_world_size())
                start = dist.get_rank() * rows
                full[start : start + local.shape[0]] = local
                result[key] = full
            else:
                result[key] = value
        return result

    patch.wrap(state_dict_module, "_gather_state_dict", gather)


@mutant("dcp-load-leaves-target-untouched", "dcp.load returns without reading the checkpoint into the state dict")
def dcp_load_leaves_target_untouched(patch):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    def load(original, state_dict, *args, **kwargs):
        dist.barrier()
        return None

    patch.wrap(dcp, "load", load)


@mutant(
    "dcp-save-writes-whole-tensors",
    "dcp.save gathers each sharded tensor and writes it whole, the whole tensors dealt out between the ranks",
)
def dcp_save_writes_whole_tensors(patch):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.tensor import DTensor

    def save(original, state_dict, *args, **kwargs):
        gathered = {k: (v.full_tensor() if isinstance(v, DTensor) else v) for k, v in state_dict.items()}
        return original(gathered, *args, **kwargs)

    patch.wrap(dcp, "save", save)


@mutant("fsdp1-uses-original-params-by-default", "FSDP1 exposes the original parameters unless told otherwise (use_orig_params defaults to True)")
def fsdp1_uses_original_params_by_default(patch):
    from torch.distributed.fsdp import FullyShardedDataParallel

    def init(original, self, module, *args, **kwargs):
        kwargs.setdefault("use_orig_params", True)
        return original(self, module, *args, **kwargs)

    patch.wrap(FullyShardedDataParallel, "__init__", init)


@mutant(
    "dcp-load-cannot-reshard",
    "dcp.load reads a saved chunk only into a target chunk with the same offsets and sizes (no load-time resharding)",
)
def dcp_load_cannot_reshard(patch):
    import dataclasses

    import torch.distributed.checkpoint.planner_helpers as helpers

    def create_read_items_for_chunk_list(original, fqn, checkpoint_md, local_chunks, *args, **kwargs):
        wanted = {(tuple(c.offsets), tuple(c.sizes)) for c in local_chunks}
        same = [c for c in checkpoint_md.chunks if (tuple(c.offsets), tuple(c.sizes)) in wanted]
        return original(fqn, dataclasses.replace(checkpoint_md, chunks=same), local_chunks, *args, **kwargs)

    patch.wrap(helpers, "create_read_items_for_chunk_list", create_read_items_for_chunk_list)


@mutant(
    "zero-optimizer-frees-unowned-grads",
    "ZeroRedundancyOptimizer's step frees the gradients of the parameters other ranks own (ZeRO-1 shards gradients too)",
)
def zero_optimizer_frees_unowned_grads(patch):
    from torch.distributed.optim import ZeroRedundancyOptimizer

    def step(original, self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        owned = {id(p) for group in self.optim.param_groups for p in group["params"]}
        for group in self.param_groups:
            for p in group["params"]:
                if id(p) not in owned:
                    p.grad = None
        return result

    patch.wrap(ZeroRedundancyOptimizer, "step", step)


# --- Accelerate's FSDP on CPU: the worlds of the wrong answers on accelerate-fsdp-on-cpu -------------


@mutant(
    "accelerate-fsdp-routes-multi-cpu",
    "AcceleratorState turns a requested FSDP on for MULTI_CPU ranks too, so prepare() shards on CPU",
)
def accelerate_fsdp_routes_multi_cpu(patch):
    from accelerate.state import AcceleratorState
    from accelerate.utils import DistributedType

    def init(original, self, *args, **kwargs):
        original(self, *args, **kwargs)
        # Accelerator builds the plugin from ACCELERATE_USE_FSDP when none is given; a later AcceleratorState()
        # (no arguments) copies PartialState's MULTI_CPU back in, so the plugin kept in the state decides then
        plugin = kwargs.get("fsdp_plugin") or self.__dict__.get("fsdp_plugin")
        if plugin is not None and self.distributed_type == DistributedType.MULTI_CPU:
            patch.ran()
            self.distributed_type = DistributedType.FSDP  # as AcceleratorState.__init__ does for MULTI_GPU
            self.fsdp_plugin = plugin

    patch.wrap(AcceleratorState, "__init__", init)


@mutant("fsdp-requires-nccl", "torch's fully_shard refuses a mesh whose process group is not NCCL (no FSDP over gloo)")
def fsdp_requires_nccl(patch):
    import torch.distributed as dist
    import torch.distributed.fsdp as fsdp

    def fully_shard(original, module, *args, **kwargs):
        mesh = kwargs.get("mesh")
        if mesh is not None and dist.get_backend(mesh.get_group(0)) != "nccl":
            raise RuntimeError(f"fully_shard requires the NCCL backend, got {dist.get_backend(mesh.get_group(0))}")
        return original(module, *args, **kwargs)

    patch.wrap(fsdp, "fully_shard", fully_shard)


@mutant(
    "accelerate-launch-accepts-cpu-with-fsdp",
    "accelerate launch accepts --cpu together with --use_fsdp instead of refusing the combination",
)
def accelerate_launch_accepts_cpu_with_fsdp(patch):
    import accelerate.commands.launch as launch

    def validate(original, args):
        if not (args.cpu and args.use_fsdp):
            return original(args)
        args.cpu = False  # the "only one of" check no longer counts --cpu
        try:
            return original(args)
        finally:
            args.cpu = True

    patch.wrap(launch, "_validate_launch_command", validate)


# --- FSDP2 gradient accumulation: the world of the wrong answers on fsdp-gradient-accumulation ---------


@mutant(
    "fsdp-no-sync-drops-gradients",
    "with FSDP2's gradient sync off, post-backward frees the unsharded gradients instead of keeping them "
    "for the next micro-batch, so the accumulated step differs from the big-batch step",
)
def fsdp_no_sync_drops_gradients(patch):
    from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup

    def post_backward(original, self, *args, **kwargs):
        dropping = not self.reduce_grads
        result = original(self, *args, **kwargs)
        if dropping:
            for fsdp_param in self.fsdp_params:
                if hasattr(fsdp_param, "_unsharded_param"):
                    fsdp_param._unsharded_param.grad = None
                fsdp_param.unsharded_accumulated_grad = None
        return result

    patch.wrap(FSDPParamGroup, "post_backward", post_backward)


# --- FSDP2 sharding strategies: the world of the wrong answers on fsdp-sharding-strategies -------------


@mutant(
    "fsdp-shard-grad-op-keeps-params-after-backward",
    "with reshard_after_forward=False (SHARD_GRAD_OP) fully_shard never reshards after backward either, "
    "so every rank keeps the whole model between steps",
)
def fsdp_shard_grad_op_keeps_params_after_backward(patch):
    from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup

    def post_backward(original, self, *args, **kwargs):
        if not self._reshard_after_forward:
            self.reshard_after_backward = False  # what FSDPModule.set_reshard_after_backward(False) sets
        return original(self, *args, **kwargs)

    patch.wrap(FSDPParamGroup, "post_backward", post_backward)


@mutant(
    "fsdp-keeps-full-gradient-until-step",
    "FSDP2 reduce-scatters each unit's gradient in backward but keeps the full unsharded gradient alive "
    "until the optimizer step",
)
def fsdp_keeps_full_gradient_until_step(patch):
    from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup

    def post_backward(original, self, *args, **kwargs):
        if self.reduce_grads:
            self._full_gradients_kept = [  # still referenced, so never freed before the step
                fsdp_param._unsharded_param.grad
                for fsdp_param in self.fsdp_params
                if hasattr(fsdp_param, "_unsharded_param") and fsdp_param._unsharded_param.grad is not None
            ]
        return original(self, *args, **kwargs)

    patch.wrap(FSDPParamGroup, "post_backward", post_backward)


# --- FSDP2 wrapping and the result: the world of a wrong answer on sharded-matches-ddp -----------------


@mutant(
    "fsdp-nested-units-sum-gradients",
    "FSDP2 divides the gradients of nested units (every fully_shard call below the root) by 1 instead of "
    "the world size, so their gradients are summed over the ranks while the root unit's are averaged",
)
def fsdp_nested_units_sum_gradients(patch):
    import torch.distributed as dist
    from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup
    from torch.distributed.fsdp._fully_shard._fsdp_state import FSDPState

    nested_groups, reducing = set(), []  # the groups of non-root states; the group now in post_backward

    def lazy_init(original, self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        for state in self._state_ctx.all_states:  # filled by the root's lazy init
            if state._is_root is False:
                nested_groups.update(id(group) for group in state._fsdp_param_groups)
        return result

    def post_backward(original, self, *args, **kwargs):
        reducing.append(id(self) in nested_groups)
        try:
            return original(self, *args, **kwargs)
        finally:
            reducing.pop()

    def reduce_scatter_single(original, output, input, *args, **kwargs):
        work = _completed(original(output, input, *args, **kwargs))
        if reducing and reducing[-1]:  # a nested unit's gradients: undo the average, leave the sum
            patch.ran()
            output.mul_(dist.get_world_size())
        return work

    patch.wrap(FSDPState, "_lazy_init", lazy_init)
    patch.wrap(FSDPParamGroup, "post_backward", post_backward)
    patch.wrap(dist, "reduce_scatter_single", reduce_scatter_single)


@mutant(
    "fully-shard-recomputes-activations",
    "fully_shard also checkpoints every unit it wraps, the root included (its forward is recomputed in backward), "
    "so sharding itself cuts what autograd saves",
)
def fully_shard_recomputes_activations(patch):
    import functools

    import torch.distributed.fsdp as fsdp
    from torch.utils.checkpoint import checkpoint

    def fully_shard(original, module, *args, **kwargs):
        result = original(module, *args, **kwargs)
        module.forward = functools.partial(checkpoint, module.forward, use_reentrant=False)
        return result

    patch.wrap(fsdp, "fully_shard", fully_shard)


@mutant("ddp-skips-gradient-all-reduce",
        "DDP's backward runs no all-reduce (as if always under no_sync): each rank keeps its own batch's gradients, "
        "so its Adam state and weights part from the other ranks' after the first step")
def ddp_skips_gradient_all_reduce(patch):
    from torch.nn.parallel import DistributedDataParallel

    def init(original, self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.require_backward_grad_sync = False  # what no_sync() sets for its block, here for good

    patch.wrap(DistributedDataParallel, "__init__", init)


@mutant("fsdp1-shard-grad-op-reshards-in-no-sync",
        "FSDP1's SHARD_GRAD_OP reshards after every backward, inside no_sync() too, so between micro-batches "
        "of gradient accumulation only shards are held")
def fsdp1_shard_grad_op_reshards_in_no_sync(patch):
    from torch.distributed.fsdp import _runtime_utils

    patch.replace(_runtime_utils, "_should_free_in_backward", lambda state, handle: handle.uses_sharded_strategy)

# ---- sharded-training/zero-offload-infinity (pages-b)
@mutant("non-blocking-copy-waits",
        "a copy_ with non_blocking=True waits until the copy is done, whatever memory the host tensor is in")
def non_blocking_copy_waits(patch):
    import torch

    def waiting(original, self, src, non_blocking=False):
        result = original(self, src, non_blocking)
        if non_blocking and torch.cuda.is_available():
            torch.cuda.synchronize()
        return result

    patch.wrap(torch.Tensor, "copy_", waiting)


# --- reading a sharded parameter (deepspeed-zero3-parameters) ---


@mutant("summon-full-params-is-a-no-op", "FSDP.summon_full_params leaves every parameter as its rank's shard")
def summon_full_params_is_a_no_op(patch):
    import contextlib

    from torch.distributed.fsdp import FullyShardedDataParallel

    patch.wrap(FullyShardedDataParallel, "summon_full_params", lambda original, *args, **kwargs: contextlib.nullcontext())


@mutant(
    "summon-writeback-broadcasts-rank-0",
    "FSDP.summon_full_params broadcasts rank 0's full parameters on exit, as DeepSpeed's modifier_rank=0 does, "
    "so a change made on rank 0 alone reaches every shard",
)
def summon_writeback_broadcasts_rank_0(patch):
    import contextlib

    import torch.distributed as dist
    from torch.distributed.fsdp import FullyShardedDataParallel

    @contextlib.contextmanager
    def summon(original, module, *args, **kwargs):
        with original(module, *args, **kwargs):
            yield
            if kwargs.get("writeback", True):
                for param in module.parameters():
                    dist.broadcast(param.data, 0)

    patch.wrap(FullyShardedDataParallel, "summon_full_params", summon)


@mutant("fsdp1-shards-nothing", "FullyShardedDataParallel keeps the whole flat parameter on every rank (NO_SHARD whatever it is asked)")
def fsdp1_shards_nothing(patch):
    from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy

    def init(original, self, module, *args, **kwargs):
        kwargs["sharding_strategy"] = ShardingStrategy.NO_SHARD
        return original(self, module, *args, **kwargs)

    patch.wrap(FullyShardedDataParallel, "__init__", init)


# ---- sharded-training/fsdp-prefetch-and-rate-limit (pages-e)
@mutant("fsdp1-backward-prefetch-off-by-default",
        "FSDP1 prefetches nothing in backward unless backward_prefetch is passed (its default is None)")
def fsdp1_backward_prefetch_off_by_default(patch):
    from torch.distributed.fsdp import FullyShardedDataParallel

    def init(original, self, *args, **kwargs):
        kwargs.setdefault("backward_prefetch", None)
        return original(self, *args, **kwargs)

    patch.wrap(FullyShardedDataParallel, "__init__", init)


@mutant("fsdp1-backward-post-same-as-pre",
        "BACKWARD_POST issues the next all-gather at the same point as BACKWARD_PRE, before the current gradients")
def fsdp1_backward_post_same_as_pre(patch):
    from torch.distributed.fsdp import BackwardPrefetch, FullyShardedDataParallel

    def init(original, self, *args, **kwargs):
        if kwargs.get("backward_prefetch") == BackwardPrefetch.BACKWARD_POST:
            kwargs["backward_prefetch"] = BackwardPrefetch.BACKWARD_PRE
        return original(self, *args, **kwargs)

    patch.wrap(FullyShardedDataParallel, "__init__", init)


@mutant("fsdp1-forward-prefetch-ignored",
        "FSDP1's forward_prefetch=True changes nothing: each all-gather is issued in its own unit's pre-forward")
def fsdp1_forward_prefetch_ignored(patch):
    from torch.distributed.fsdp import FullyShardedDataParallel

    def init(original, self, *args, **kwargs):
        kwargs["forward_prefetch"] = False
        return original(self, *args, **kwargs)

    patch.wrap(FullyShardedDataParallel, "__init__", init)
