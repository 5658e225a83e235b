"""Mutants for model-parallelism: autograd behaving the way the handout's "each stage's result has an
error, the final result is biased" would need it to.

Imports of torch stay inside the functions: loading this catalogue costs nothing.
"""

from verify.mutation import mutant


@mutant(
    "backward-overwrites-grad",
    "backward() overwrites .grad instead of accumulating into it, so only the gradient of the last backward "
    "(the first micro-batch's, in this pipeline) survives: the result is biased towards one micro-batch",
)
def backward_overwrites_grad(patch):
    import torch

    def leaves(tensor):
        """The leaf tensors (parameters) whose gradients this backward accumulates into."""
        seen, stack, found = set(), [tensor.grad_fn], []
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            if hasattr(node, "variable"):
                found.append(node.variable)
            stack.extend(next_node for next_node, _ in node.next_functions)
        return found

    def backward(original, self, *args, **kwargs):
        for leaf in leaves(self):
            leaf.grad = None  # forget what earlier backward passes accumulated
        return original(self, *args, **kwargs)

    patch.wrap(torch.Tensor, "backward", backward)


@mutant(
    "recv-does-not-wait",
    "torch.distributed.recv returns at once, before the sender's tensor has arrived (the buffer keeps what "
    "it held): a stage never waits for the previous one",
)
def recv_does_not_wait(patch):
    import torch.distributed as dist

    def no_wait(original, tensor, src=None, group=None, tag=0, group_src=None):
        work = dist.irecv(tensor, src=src, group=group, tag=tag)  # still posted, so the sender is not stuck
        _pending.append(work)  # never waited for before the tensor is used
        return src

    _pending = []
    patch.wrap(dist, "recv", no_wait)


@mutant("rowwise-parallel-skips-all-reduce", "a row-parallel Linear returns its rank's partial sum without the all-reduce")
def rowwise_parallel_skips_all_reduce(patch):
    from torch.distributed.tensor.parallel import RowwiseParallel

    def partial_sum(original, output_layouts, use_local_output, mod, outputs, device_mesh):
        return outputs.to_local()  # the Partial placement is never redistributed: no all-reduce

    patch.wrap(RowwiseParallel, "_prepare_output_fn", partial_sum)


@mutant("colwise-parallel-replicates-weights", "a column-parallel Linear keeps the whole weight on every rank")
def colwise_parallel_replicates_weights(patch):
    import torch
    from torch.distributed.tensor import Replicate, distribute_tensor
    from torch.distributed.tensor.parallel import ColwiseParallel

    def replicate(original, self, name, module, device_mesh):
        for param_name, param in list(module.named_parameters()):
            replicated = torch.nn.Parameter(distribute_tensor(param, device_mesh, [Replicate()]))
            module.register_parameter(param_name, replicated)

    patch.wrap(ColwiseParallel, "_partition_linear_fn", replicate)


@mutant("p2p-exchange-delivers-own-data", "batch_isend_irecv completes, but each receive buffer gets the rank's own outgoing tensor")
def p2p_exchange_delivers_own_data(patch):
    import torch.distributed as dist

    def loopback(original, ops):
        sends = [op.tensor for op in ops if op.op is dist.isend]
        receives = [op.tensor for op in ops if op.op is dist.irecv]
        for sent, buffer in zip(sends, receives):
            buffer.copy_(sent)
        return []

    patch.wrap(dist, "batch_isend_irecv", loopback)


@mutant("fsdp2-shards-nothing", "FSDP2's fully_shard leaves every parameter whole on every rank")
def fsdp2_shards_nothing(patch):
    import torch.distributed.fsdp

    patch.wrap(torch.distributed.fsdp, "fully_shard", lambda original, module, *args, **kwargs: module)


@mutant("one-f-one-b-runs-all-forwards-first", "Schedule1F1B runs every micro-batch's forward before any backward, as GPipe does")
def one_f_one_b_runs_all_forwards_first(patch):
    from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe

    patch.replace(Schedule1F1B, "_step_microbatches", ScheduleGPipe._step_microbatches)


@mutant("shard-placement-keeps-whole-tensor", "distribute_tensor with Shard leaves the whole tensor on every rank")
def shard_placement_keeps_whole_tensor(patch):
    from torch.distributed.tensor import Shard

    patch.wrap(Shard, "_make_shard_tensor", lambda original, cls, dim, tensor, *args, **kwargs: tensor.contiguous())


@mutant("shard-to-replicate-skips-all-gather", "redistributing Shard to Replicate keeps each rank's shard instead of all-gathering")
def shard_to_replicate_skips_all_gather(patch):
    from torch.distributed.tensor import Shard

    patch.wrap(Shard, "_to_replicate_tensor", lambda original, self, local_tensor, *args, **kwargs: local_tensor)


@mutant("partial-reduce-is-a-no-op", "turning a Partial DTensor into Replicate keeps each rank's own term (no all-reduce)")
def partial_reduce_is_a_no_op(patch):
    from torch.distributed.tensor import Partial

    patch.wrap(Partial, "_reduce_value", lambda original, self, tensor, mesh, mesh_dim: tensor)


@mutant(
    "sequence-parallel-gathers-the-sequence",
    "SequenceParallel all-gathers the sequence before the norm, so every rank normalises the full, replicated "
    "activations (only the layout changes, not the memory)",
)
def sequence_parallel_gathers_the_sequence(patch):
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import SequenceParallel

    def gathered(original, sequence_sharding, mod, inputs, device_mesh):
        return original(sequence_sharding, mod, inputs, device_mesh).redistribute(placements=[Replicate()])

    patch.wrap(SequenceParallel, "_prepare_input_fn", gathered)


@mutant(
    "partial-to-shard-all-reduces",
    "turning a Partial DTensor into Shard all-reduces the whole tensor and keeps this rank's chunk, instead of "
    "a reduce-scatter",
)
def partial_to_shard_all_reduces(patch):
    from torch.distributed.tensor import Partial

    def all_reduce_then_chunk(original, self, tensor, mesh, mesh_dim, shard_spec):
        reduced = self._reduce_value(tensor, mesh, mesh_dim)  # a full all-reduce
        return shard_spec._split_tensor(reduced, mesh.size(mesh_dim), with_padding=False)[0][
            mesh.get_local_rank(mesh_dim)
        ].contiguous()

    patch.wrap(Partial, "_reduce_shard_value", all_reduce_then_chunk)


@mutant(
    "pipeline-stages-never-wait",
    "torch.distributed.pipelining's schedules never wait for their sends and receives: a stage starts each "
    "micro-batch's forward and backward without waiting for the neighbouring stage's activations or gradients",
)
def pipeline_stages_never_wait(patch):
    from torch.distributed.pipelining import schedules

    def no_wait(original, work):
        _pending.extend(work)  # posted, and kept alive, but never waited for before the buffers are used

    _pending = []
    patch.wrap(schedules, "_wait_batch_p2p", no_wait)


@mutant(
    "prepare-pipelines-the-model",
    "Accelerator.prepare splits an nn.Sequential model into one stage per process, as a pipeline would: each "
    "rank keeps only its consecutive share of the layers (the others become Identity)",
)
def prepare_pipelines_the_model(patch):
    import torch
    from accelerate import Accelerator

    def keep_own_stage(original, self, model, *args, **kwargs):
        prepared = original(self, model, *args, **kwargs)
        layers = getattr(prepared, "module", prepared)  # the model inside the DDP wrapper
        if isinstance(layers, torch.nn.Sequential):
            per_stage = -(-len(layers) // self.num_processes)  # ceil: consecutive layers per rank
            for index in range(len(layers)):
                if index // per_stage != self.process_index:
                    layers[index] = torch.nn.Identity()  # another rank's stage: not held here
        return prepared

    patch.wrap(Accelerator, "prepare_model", keep_own_stage)


# ---- model-parallelism/moe-capacity-factor (pages-b)
@mutant("switch-router-ignores-capacity",
        "the Switch router keeps every token however many pick the same expert (capacity only sizes a buffer)")
def switch_router_ignores_capacity(patch):
    from transformers.models.switch_transformers.modeling_switch_transformers import SwitchTransformersTop1Router

    def no_capacity(original, self, hidden_states):
        capacity, self.expert_capacity = self.expert_capacity, hidden_states.shape[-2]  # room for a whole sequence
        try:
            return original(self, hidden_states)
        finally:
            self.expert_capacity = capacity

    patch.wrap(SwitchTransformersTop1Router, "forward", no_capacity)


@mutant(
    "fully-shard-splits-last-dim-by-default",
    "fully_shard, given no shard_placement_fn, shards each parameter on its last dimension (columns), not dim 0",
)
def fully_shard_splits_last_dim_by_default(patch):
    import torch.distributed.fsdp as fsdp
    from torch.distributed.tensor import Shard

    def fully_shard(original, module, *args, **kwargs):
        kwargs.setdefault("shard_placement_fn", lambda parameter: Shard(parameter.dim() - 1))
        return original(module, *args, **kwargs)

    patch.wrap(fsdp, "fully_shard", fully_shard)


# --- scatter/gather between pipeline stages (pipeline-tp-scatter-gather) ---


@mutant(
    "replicate-to-shard-keeps-whole-tensor",
    "redistributing a Replicate DTensor to Shard keeps the whole tensor on every rank, so each tensor-parallel "
    "rank would still send all of it to the next stage",
)
def replicate_to_shard_keeps_whole_tensor(patch):
    from torch.distributed.tensor import Shard

    patch.wrap(Shard, "_replicate_to_shard", lambda original, self, local_tensor, *args, **kwargs: local_tensor)


# ---- model-parallelism/moe-load-balancing-loss (pages-e)
@mutant("switch-balance-loss-unscaled",
        "the Switch balancing loss is the plain sum of f_i * P_i, without the factor N (1/N at perfect balance)")
def switch_balance_loss_unscaled(patch):
    from transformers.models.switch_transformers import modeling_switch_transformers as switch

    def unscaled(original, router_probs, expert_indices):
        return original(router_probs, expert_indices) / router_probs.shape[-1]

    patch.wrap(switch, "load_balancing_loss_func", unscaled)


@mutant("switch-balance-loss-no-gradient",
        "the balancing loss cannot steer the router: the argmax counts f_i carry no gradient, and P_i is treated "
        "as a constant too")
def switch_balance_loss_no_gradient(patch):
    from transformers.models.switch_transformers import modeling_switch_transformers as switch

    def detached(original, router_probs, expert_indices):
        return original(router_probs.detach(), expert_indices)

    patch.wrap(switch, "load_balancing_loss_func", detached)


# ---- model-parallelism/moe-router-precision (pages-e)
@mutant("switch-router-ignores-router-dtype",
        "the Switch router computes its logits and softmax in the hidden states' dtype, whatever router_dtype says")
def switch_router_ignores_router_dtype(patch):
    from transformers.models.switch_transformers import modeling_switch_transformers as switch

    def forward(original, self, hidden_states):
        self.dtype = hidden_states.dtype
        return original(self, hidden_states)

    patch.wrap(switch.SwitchTransformersTop1Router, "forward", forward)


@mutant("switch-router-dispatch-in-float32",
        "with router_dtype float32 the whole routing decision is float32: the expert is chosen before the "
        "probabilities are cast back to the model's dtype")
def switch_router_dispatch_in_float32(patch):
    import torch
    from transformers.models.switch_transformers import modeling_switch_transformers as switch

    def forward(original, self, hidden_states):
        expert_index, router_probs, router_logits = original(self, hidden_states)
        choice = torch.nn.functional.one_hot(router_logits.argmax(-1), num_classes=self.num_experts)
        keep = torch.cumsum(choice, dim=-2) <= self.expert_capacity
        return choice * keep, router_probs, router_logits

    patch.wrap(switch.SwitchTransformersTop1Router, "forward", forward)


# ---- model-parallelism/vocab-parallel-cross-entropy (pages-e)
@mutant("loss-parallel-normalises-per-shard",
        "under loss_parallel each rank normalises the softmax over its own vocabulary shard (no cross-rank max "
        "and sum of exponentials)")
def loss_parallel_normalises_per_shard(patch):
    import torch
    from torch.distributed.tensor.parallel import loss as loss_module

    def local_log_softmax(x, dim, half_to_float, mesh, mesh_dim):
        patch.ran()
        return torch.log_softmax(x.float() if half_to_float else x, dim)

    patch.replace(loss_module, "_log_softmax", local_log_softmax)


@mutant("loss-parallel-gathers-logits",
        "loss_parallel all-gathers the vocabulary-sharded logits and computes the ordinary loss")
def loss_parallel_gathers_logits(patch):
    import torch.distributed.tensor.parallel as tensor_parallel
    import torch.nn.functional as F
    from torch.distributed.tensor import DTensor

    def gathering(original, *args, **kwargs):
        patch.ran()
        context = original(*args, **kwargs)

        class Gathering:
            def __enter__(self):
                self.cross_entropy = F.cross_entropy

                def gathered(input, target, *rest, **options):
                    if isinstance(input, DTensor):
                        input = input.full_tensor()
                    return self.cross_entropy(input, target, *rest, **options)

                F.cross_entropy = gathered
                return context.__enter__()

            def __exit__(self, *exc):
                F.cross_entropy = self.cross_entropy
                return context.__exit__(*exc)

        return Gathering()

    patch.wrap(tensor_parallel, "loss_parallel", gathering)  # where `from ... import loss_parallel` reads it
