# Two DistributedDataParallel options, both reachable from Accelerate's DistributedDataParallelKwargs:
# * gradient_as_bucket_view=True: each param.grad becomes a view into DDP's flat all-reduce bucket,
#   so gradients are not stored twice (a comm hook sees the bucket buffers; we compare storages).
# * static_graph=True: DDP may assume the graph is the same every iteration, which is what makes a
#   block run twice under reentrant activation checkpointing work; by default DDP raises
#   "Expected to mark a variable ready only once".
# * gradient_as_bucket_view=True changes where gradients live, not their values: with each rank on
#   its own data, the averaged param.grad after two steps is the same as with the default (bit for
#   bit on 2 ranks; on 3 ranks it differed by 1.19e-7: one path multiplies by 1/3, the other divides by 3).
# Negative controls: the default gradient_as_bucket_view=False (grads have storage of their own);
# the default static_graph=False on the same checkpointed model; for the values, the same bucket-view
# run whose backward skips DDP's averaging (no_sync), which the comparison must tell apart.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/data-parallelism/ddp_bucket_view_static_graph.py
import contextlib

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import DistributedDataParallelKwargs
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.utils.checkpoint import checkpoint

import _claims


def prepare(module, **ddp_options):
    accelerator = Accelerator(kwargs_handlers=[DistributedDataParallelKwargs(**ddp_options)])
    return accelerator, accelerator.prepare(module)


def grads_inside_buckets(gradient_as_bucket_view, set_to_none=False, iterations=2):
    """How many param.grad tensors share storage with a bucket buffer after each backward (the last: the 2nd)."""
    torch.manual_seed(0)
    _, model = prepare(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 1)),
                       gradient_as_bucket_view=gradient_as_bucket_view)
    buffers = {}

    def remember_buffer(state, bucket):  # the flat tensor DDP all-reduces for this bucket
        buffers[bucket.index()] = bucket.buffer()
        return allreduce_hook(state, bucket)

    model.register_comm_hook(state=None, hook=remember_buffer)
    params, inside_each = list(model.parameters()), []
    for _ in range(iterations):  # "gradients will be views after first iteration" (DDP docstring)
        model.zero_grad(set_to_none=set_to_none)
        model(torch.randn(4, 16)).sum().backward()
        bucket_storages = {b.untyped_storage().data_ptr() for b in buffers.values()}
        inside_each.append(sum(p.grad.untyped_storage().data_ptr() in bucket_storages for p in params))
    own_bytes = sum(p.grad.numel() * p.grad.element_size() for p in params
                    if p.grad.untyped_storage().data_ptr() not in bucket_storages)
    return inside_each[-1], len(params), own_bytes, inside_each


def scaled_allreduce(scale):
    """A comm hook that scales each bucket in place by `scale(bucket, world size)`, then all-reduces (sums) it."""
    def hook(state, bucket):
        scale(bucket.buffer(), dist.get_world_size())
        return dist.all_reduce(bucket.buffer(), async_op=True).get_future().then(lambda fut: fut.value()[0])
    return hook


multiply_by_reciprocal = scaled_allreduce(lambda buffer, world: buffer.mul_(1.0 / world))
divide_by_world = scaled_allreduce(lambda buffer, world: buffer.div_(world))


def gradients_after_two_steps(gradient_as_bucket_view, average=True, hook=None):
    """Every param.grad after the 2nd backward, each rank on its own data (seeded by its rank)."""
    torch.manual_seed(0)
    accelerator, model = prepare(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 1)),
                                 gradient_as_bucket_view=gradient_as_bucket_view)
    if hook is not None:
        model.register_comm_hook(state=None, hook=hook)
    data = torch.Generator().manual_seed(1 + accelerator.process_index)
    for _ in range(2):
        model.zero_grad(set_to_none=False)
        with contextlib.nullcontext() if average else model.no_sync():
            model(torch.randn(4, 16, generator=data)).sum().backward()
    return torch.cat([p.grad.flatten() for p in model.parameters()]).clone()


class CheckpointedTwice(torch.nn.Module):
    """One block applied twice, each time under activation checkpointing (reentrant unless told otherwise)."""

    def __init__(self, use_reentrant=True):
        super().__init__()
        self.embed, self.block = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
        self.use_reentrant = use_reentrant

    def forward(self, x):
        x = self.embed(x)
        x = checkpoint(self.block, x, use_reentrant=self.use_reentrant)
        return checkpoint(self.block, x, use_reentrant=self.use_reentrant)


def train_checkpointed(static_graph, iterations=3, use_reentrant=True):
    torch.manual_seed(0)
    accelerator, model = prepare(CheckpointedTwice(use_reentrant), static_graph=static_graph)
    for step in range(iterations):
        try:
            model.zero_grad()
            accelerator.backward(model(torch.randn(4, 8)).pow(2).mean())
        except RuntimeError as error:
            return step, str(error)
    return iterations, ""


view_inside, n_params, view_own_bytes, _ = grads_inside_buckets(gradient_as_bucket_view=True)
copy_inside, _, copy_own_bytes, _ = grads_inside_buckets(gradient_as_bucket_view=False)
# Details: with zero_grad(set_to_none=True) each backward allocates a fresh .grad; is it a view again after it?
*_, set_to_none_inside = grads_inside_buckets(gradient_as_bucket_view=True, set_to_none=True, iterations=3)
view_grads = gradients_after_two_steps(gradient_as_bucket_view=True)
copy_grads = gradients_after_two_steps(gradient_as_bucket_view=False)
view_local_grads = gradients_after_two_steps(gradient_as_bucket_view=True, average=False)
# Details: which rounding each path matches, a hook that multiplies by 1/world or one that divides by world
# (identical on 2 ranks, where 1/2 is exact; run with --num_processes 3 to tell them apart).
rounding = {
    "default_minus_multiply_by_reciprocal_hook": gradients_after_two_steps(False, hook=multiply_by_reciprocal),
    "default_minus_divide_by_world_hook": gradients_after_two_steps(False, hook=divide_by_world),
}
rounding = {name: (copy_grads - grads).abs().max().item() for name, grads in rounding.items()}
rounding["bucket_view_minus_divide_by_world_hook"] = (
    view_grads - gradients_after_two_steps(False, hook=divide_by_world)).abs().max().item()
print(f"[rank {dist.get_rank()}] world size {dist.get_world_size()}, largest differences: {rounding}", flush=True)
static_steps, static_error = train_checkpointed(static_graph=True)
default_steps, default_error = train_checkpointed(static_graph=False)
non_reentrant_default_steps, _ = train_checkpointed(static_graph=False, use_reentrant=False)

_claims.equal(
    "grads_are_views_into_buckets",
    measured=view_inside,
    control=copy_inside,
    expected=n_params,
    grad_bytes_outside_buckets_with_view=view_own_bytes,
    grad_bytes_outside_buckets_default=copy_own_bytes,
    views_after_each_backward_with_set_to_none=set_to_none_inside,
)
_claims.at_most(
    "bucket_view_keeps_averaged_values",
    measured=(view_grads - copy_grads).abs().max().item(),
    control=(view_local_grads - copy_grads).abs().max().item(),
    tolerance=0.0,
    n_gradient_values=copy_grads.numel(),
    largest_averaged_gradient=copy_grads.abs().max().item(),
    world_size=dist.get_world_size(),
    **rounding,
)
_claims.equal(
    "static_graph_allows_block_checkpointed_twice",
    measured=static_steps,
    control=default_steps,
    expected=3,
    default_error=default_error[:600],
    static_graph_error=static_error,
    default_ddp_iterations_with_non_reentrant_checkpoint=non_reentrant_default_steps,
)
