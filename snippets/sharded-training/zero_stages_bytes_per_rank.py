# What each rank holds under DDP and under ZeRO stages 1, 2 and 3, measured in bytes after one Adam
# step of the same tiny MLP on 2 ranks:
#   DDP     parameters, gradients and Adam states (exp_avg, exp_avg_sq, step) full and identical on every
#           rank (each tensor compared across ranks after the step: DDP's all-reduce is what makes them so), and
#           the reducer's own gradient-sized buckets on top unless gradient_as_bucket_view=True (seen
#           through a comm hook, which receives the very bucket tensors the reducer all-reduces)
#   ZeRO-1  torch.distributed.optim.ZeroRedundancyOptimizer: the Adam states are split between ranks
#   ZeRO-2  gradients split too: reduce-scatter instead of all-reduce, Adam on this rank's flat slice,
#           all-gather of the updated slices (written out below, ~25 lines); its step equals DDP's, and
#           the share of the averaged gradient a rank holds is counted in what the reduce-scatter delivered
#   ZeRO-3  torch's FSDP2 `fully_shard` on a CPU device mesh: the parameters themselves are split
#   Activations: the bytes autograd saves for backward (parameters left out), DDP against FSDP2
#   When ZeRO-2 frees the full gradient: FSDP2 with reshard_after_forward=False (FSDP1's SHARD_GRAD_OP,
#           ZeRO-2-like), counting the bytes of every tensor the model and its FSDP state keep alive after
#           backward, before the optimizer step
# Negative controls: for DDP's replication, the same DDP step under no_sync() (no all-reduce: the ranks'
# gradients, Adam states and weights part); the same measurement on the DDP replica (no sharding); for the ZeRO-2 gradient
# share, the same step with an all-reduce in place of the reduce-scatter; for the ZeRO-2 step, the
# same step with the reduce-scatter replaced by this rank's own gradient; for DDP's buckets, the same
# DDP with gradient_as_bucket_view=True; for when the full gradient is freed, the same FSDP2 model with
# gradient sync turned off (no reduce-scatter in backward); for activations, the same FSDP2 model with
# its whole forward checkpointed (recomputed in backward), which does cut what autograd saves.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/sharded-training/zero_stages_bytes_per_rank.py
import copy
import functools
import gc
import types

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint

import _claims

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
set_seed(0)  # same initial weights on both ranks
model = torch.nn.Sequential(
    torch.nn.Linear(32, 128), torch.nn.Tanh(), torch.nn.Linear(128, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2)
)
inputs, targets = torch.randn(16, 32), torch.randn(16, 2)
my_rows = slice(rank * 8, rank * 8 + 8)  # each rank trains on its half of the batch
# this rank's rows in storage of their own: a view would carry the other rank's half, which the count of
# saved activation bytes (storages) would then include
my_inputs, my_targets = inputs[my_rows].clone(), targets[my_rows].clone()


def nbytes(tensor):
    """Bytes this rank really stores: for a sharded DTensor, only the local shard."""
    if isinstance(tensor, DTensor):
        tensor = tensor.to_local()
    return tensor.numel() * tensor.element_size()


def state_bytes(optimizer):
    """Bytes of every tensor in an optimizer's per-parameter state (Adam: exp_avg, exp_avg_sq, step)."""
    return sum(nbytes(v) for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v))


def one_step(net, optimizer):
    torch.nn.functional.mse_loss(net(my_inputs), my_targets).backward()
    optimizer.step()


# --- Reference: ONE process, no distribution: what one full copy of each part weighs -------------
single = copy.deepcopy(model)
single_adam = torch.optim.Adam(single.parameters(), lr=1e-3)
torch.nn.functional.mse_loss(single(inputs), targets).backward()
single_adam.step()
full_copy = {
    "params": sum(nbytes(p) for p in single.parameters()),
    "grads": sum(nbytes(p.grad) for p in single.parameters()),
    "optimizer": state_bytes(single_adam),
}

# --- DDP: a full replica of everything on every rank -------------------------------------------
ddp = DDP(copy.deepcopy(model))
adam = torch.optim.Adam(ddp.parameters(), lr=1e-3)
one_step(ddp, adam)
ddp_bytes = {
    "params": sum(nbytes(p) for p in ddp.parameters()),
    "grads": sum(nbytes(p.grad) for p in ddp.parameters()),
    "optimizer": state_bytes(adam),
}
ddp_averaged_grad = torch.cat([p.grad.flatten() for p in ddp.parameters()])  # what DDP's all-reduce left


def training_state(net, optimizer):
    """Every tensor of the training state: parameters, their .grad, the optimizer's per-parameter state."""
    params = list(net.parameters())
    states = [v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v)]
    return params + [p.grad for p in params] + states


def replicated_share(tensors):
    """Bytes of the tensors that are bitwise equal on every rank, over one full copy's bytes: 1.0 only for
    a full copy that is also identical everywhere (a sharded or a diverged tensor is not counted)."""
    same = 0
    for tensor in tensors:
        local = tensor.detach().reshape(-1).to(torch.float64)
        everywhere = [torch.empty_like(local) for _ in range(world)]
        dist.all_gather(everywhere, local)
        if all(torch.equal(other, local) for other in everywhere):
            same += nbytes(tensor)
    return same / sum(full_copy.values())


ddp_replicated = replicated_share(training_state(ddp, adam))
unsynced = DDP(copy.deepcopy(model))  # control: the same DDP step without its all-reduce
unsynced_adam = torch.optim.Adam(unsynced.parameters(), lr=1e-3)
with unsynced.no_sync():
    one_step(unsynced, unsynced_adam)
unsynced_replicated = replicated_share(training_state(unsynced, unsynced_adam))


def ddp_recording_buckets(**ddp_kwargs):
    """A DDP replica after one step, and the storages of the bucket tensors its reducer all-reduced.

    The comm hook receives each bucket as the reducer built it (GradBucket.buffer(), the flat tensor
    it all-reduces); it records that tensor's storage, then runs the usual averaging all-reduce."""
    net = DDP(copy.deepcopy(model), **ddp_kwargs)
    buckets = {}

    def record(state, bucket):
        storage = bucket.buffer().untyped_storage()
        buckets[storage.data_ptr()] = storage.nbytes()
        return allreduce_hook(state, bucket)

    net.register_comm_hook(None, record)
    one_step(net, torch.optim.Adam(net.parameters(), lr=1e-3))
    return net, buckets


def bucket_copy_bytes(net, buckets):
    """Bytes of the reducer's bucket tensors that are not the storage of any .grad (a second copy)."""
    grad_storages = {p.grad.untyped_storage().data_ptr() for p in net.parameters()}
    return sum(size for pointer, size in buckets.items() if pointer not in grad_storages)


bucketed, bucketed_buckets = ddp_recording_buckets()  # DDP's default
viewed, viewed_buckets = ddp_recording_buckets(gradient_as_bucket_view=True)  # control: the grads ARE the buckets

# --- ZeRO-1: DDP for the gradients, but each rank keeps Adam states only for its own parameters ---
zero1 = DDP(copy.deepcopy(model))
zero1_adam = ZeroRedundancyOptimizer(zero1.parameters(), optimizer_class=torch.optim.Adam, lr=1e-3)
one_step(zero1, zero1_adam)  # after its local step, each rank broadcasts the parameters it owns
zero1_bytes = {
    "params": sum(nbytes(p) for p in zero1.parameters()),
    "grads": sum(nbytes(p.grad) for p in zero1.parameters() if p.grad is not None),  # every one, unless freed
    "optimizer": state_bytes(zero1_adam.optim),  # .optim is the local Adam over this rank's partition
}
zero1_elements = sum(p.numel() for group in zero1_adam.optim.param_groups for p in group["params"])


# --- ZeRO-2: flat gradient REDUCE-SCATTERED, each rank updates its slice, then ALL-GATHER -------
def zero2_step(collective="reduce_scatter"):
    """One ZeRO-2 step, written out. Controls: collective="none" keeps this rank's own gradient slice;
    "all_reduce" averages the whole flat gradient on every rank (DDP's collective) and then steps on
    this rank's slice. Returns the net, the master slice, its Adam and the gradient this rank holds."""
    net = copy.deepcopy(model)
    flat = torch.nn.utils.parameters_to_vector(net.parameters()).detach()
    shard_size = -(-flat.numel() // world)  # pad so the flat vector splits evenly
    padded = torch.zeros(shard_size * world)
    padded[: flat.numel()] = flat
    master_shard = torch.nn.Parameter(padded[rank * shard_size : (rank + 1) * shard_size].clone())  # my slice only
    adam_on_slice = torch.optim.Adam([master_shard], lr=1e-3)  # optimizer states exist for my slice only
    torch.nn.functional.mse_loss(net(my_inputs), my_targets).backward()
    full_grad = torch.zeros(shard_size * world)
    full_grad[: flat.numel()] = torch.cat([p.grad.flatten() for p in net.parameters()])
    net.zero_grad(set_to_none=True)  # the full gradient is freed as soon as it is reduce-scattered
    grad_shard = torch.zeros(shard_size)
    if collective == "reduce_scatter":
        dist.reduce_scatter_single(grad_shard, full_grad, op=dist.ReduceOp.SUM)  # the sum of MY slice, nothing else
        grad_shard /= world  # average, as DDP does
        held = grad_shard  # all the gradient this rank keeps
    elif collective == "all_reduce":  # control: DDP's collective, the whole averaged gradient everywhere
        dist.all_reduce(full_grad, op=dist.ReduceOp.SUM)
        full_grad /= world
        grad_shard.copy_(full_grad[rank * shard_size : (rank + 1) * shard_size])
        held = full_grad
    else:
        grad_shard.copy_(full_grad[rank * shard_size : (rank + 1) * shard_size])  # control: my half batch only
        held = grad_shard
    del full_grad
    master_shard.grad = grad_shard
    adam_on_slice.step()
    gathered = torch.empty(shard_size * world)
    dist.all_gather_single(gathered, master_shard.detach())  # everyone gets the updated full weights
    torch.nn.utils.vector_to_parameters(gathered[: flat.numel()], net.parameters())
    return net, master_shard, adam_on_slice, held


def averaged_elements_held(grad, start):
    """How many elements of DDP's averaged gradient this rank holds in `grad` (placed at `start`)."""
    reference = ddp_averaged_grad[start : start + grad.numel()]
    return int(torch.isclose(grad[: reference.numel()], reference, rtol=1e-5, atol=1e-7).sum())


zero2, master_shard, zero2_adam, zero2_held = zero2_step()
zero2_bytes = {
    "params": sum(nbytes(p) for p in zero2.parameters()),  # full working copy, as in DeepSpeed ZeRO-2
    "grads": nbytes(master_shard.grad),
    "optimizer": state_bytes(zero2_adam),
}
# (DeepSpeed keeps the fp32 master slice apart from 16-bit working weights; in fp32 here the slice
#  stands in for it and is not counted twice.)
zero2_alone, _, _, _ = zero2_step(collective="none")
_, _, _, all_reduced_held = zero2_step(collective="all_reduce")


def weights(net):
    return torch.cat([p.detach().flatten() for p in net.parameters()])


# --- ZeRO-3: FSDP2 shards the parameters themselves (DTensors, dim-0 shards) ----------------------
mesh = init_device_mesh("cpu", (world,))  # the ranks' existing gloo group, seen as a 1-D mesh


def fsdp2_model(**fully_shard_options):
    """A copy of the model under FSDP2: one unit per Linear, then the root."""
    net = copy.deepcopy(model)
    for layer in net:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh, **fully_shard_options)
    fully_shard(net, mesh=mesh, **fully_shard_options)
    return net


zero3 = fsdp2_model()
zero3_adam = torch.optim.Adam(zero3.parameters(), lr=1e-3)
one_step(zero3, zero3_adam)
zero3_bytes = {
    "params": sum(nbytes(p) for p in zero3.parameters()),
    "grads": sum(nbytes(p.grad) for p in zero3.parameters()),
    "optimizer": state_bytes(zero3_adam),
}



# --- When does torch's ZeRO-2 (FSDP2, reshard_after_forward=False) free the full gradient? ---------
def bytes_kept_alive(root):
    """Storage bytes of every tensor `root` keeps alive: references walked from it (attributes,
    containers, hooks and their closures), plus each tensor's .grad, which C++ holds, not a reference.
    A function's module globals are the program's, not the model's: the walk does not enter them (through
    them it would visit every object of every imported module, ~160,000, for the same storages)."""
    seen, storages, todo = set(), {}, [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType)):
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            if obj.grad is not None:
                todo.append(obj.grad)
            if type(obj) in (torch.Tensor, torch.nn.Parameter):  # a DTensor's bytes are its local tensor's
                storages[obj.untyped_storage().data_ptr()] = obj.untyped_storage().nbytes()
        if isinstance(obj, types.FunctionType):  # its closure, defaults and attributes; not __globals__
            todo.extend(part for part in (obj.__closure__, obj.__defaults__, obj.__kwdefaults__, obj.__dict__) if part)
        else:
            todo.extend(gc.get_referents(obj))
    return storages


def gradient_bytes_after_backward(gradient_sync):
    net = fsdp2_model(reshard_after_forward=False)  # parameters stay gathered from forward to backward
    if isinstance(net, FSDPModule):  # a module fully_shard did not convert has no such switch
        net.set_requires_gradient_sync(gradient_sync)  # False: no reduce-scatter in backward (FSDP2's no_sync)
    before = bytes_kept_alive(net)
    torch.nn.functional.mse_loss(net(my_inputs), my_targets).backward()
    return sum(size for pointer, size in bytes_kept_alive(net).items() if pointer not in before)


zero2_fsdp_grad_share = gradient_bytes_after_backward(gradient_sync=True) / full_copy["grads"]
no_sync_grad_share = gradient_bytes_after_backward(gradient_sync=False) / full_copy["grads"]


# --- Activations: what autograd saves for backward, under DDP and under ZeRO-3 (FSDP2) ----------
def saved_activation_bytes(net):
    """Bytes (storages, each once) of the tensors autograd saves for backward in one step, parameters
    and views of them left out: Linear saves weight.t(), a non-leaf view of the weight (under FSDP2 of the
    gathered weight), which a leaf-only test would count as an activation."""
    saved = {}

    def pack(tensor):
        base = tensor if tensor._base is None else tensor._base
        if not (base.is_leaf and base.requires_grad):
            saved[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = torch.nn.functional.mse_loss(net(my_inputs), my_targets)
    loss.backward()
    return sum(saved.values())


recomputed = fsdp2_model()  # control: the whole forward checkpointed, which does cut what is saved
# (checkpointing each Linear alone would not here: its input is the Tanh output Tanh saves anyway)
recomputed.forward = functools.partial(checkpoint, recomputed.forward, use_reentrant=False)

ddp_activations = saved_activation_bytes(DDP(copy.deepcopy(model)))
zero3_activations = saved_activation_bytes(fsdp2_model())
recomputed_activations = saved_activation_bytes(recomputed)
zero3_activation_share = zero3_activations / ddp_activations
recomputed_activation_share = recomputed_activations / ddp_activations

bytes_per_rank = {"ddp": ddp_bytes, "zero1": zero1_bytes, "zero2": zero2_bytes, "zero3": zero3_bytes}
elements = sum(p.numel() for p in model.parameters())
details = dict(bytes_per_rank=bytes_per_rank, rank=rank, model_elements=elements)


def share(level, part):
    """Fraction of one full copy that this rank stores."""
    return level[part] / full_copy[part]


_claims.between(
    "ddp_replicates_everything",
    measured=ddp_replicated,  # the bytes of the training state that are full AND equal on every rank
    control=unsynced_replicated,  # the same DDP step under no_sync(): each rank keeps its own gradients
    low=0.999,
    high=1.001,
    one_full_copy=full_copy,
    ddp_share_of_one_copy=sum(ddp_bytes.values()) / sum(full_copy.values()),
    zero3_share_of_one_copy=sum(zero3_bytes.values()) / sum(full_copy.values()),
    **details,
)


def per_rank(value):
    """This value from every rank, rank 0 first."""
    gathered = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(gathered, torch.tensor([value], dtype=torch.float64))
    return [round(g.item(), 2) for g in gathered]


# ZeRO-1: the Adam state split by whole tensors (uneven), parameters and gradients untouched
_claims.equal(
    "zero1_shards_optimizer_state",
    # [Adam-state share on rank 0, on rank 1, this rank's gradient share, this rank's parameter share]
    measured=per_rank(share(zero1_bytes, "optimizer")) + [share(zero1_bytes, "grads"), share(zero1_bytes, "params")],
    control=per_rank(share(ddp_bytes, "optimizer")) + [share(ddp_bytes, "grads"), share(ddp_bytes, "params")],
    expected=[0.65, 0.35, 1.0, 1.0],  # rank 0: the 8,192-element weight; rank 1: the other five tensors
    adam_elements_on_this_rank=zero1_elements,
    **details,
)
shard_size = master_shard.numel()
_claims.between(
    "zero2_shards_gradients",
    # the share of DDP's averaged gradient that this rank holds after the reduce-scatter delivered it
    measured=averaged_elements_held(zero2_held, rank * shard_size) / elements,
    # the same step with an all-reduce in place of the reduce-scatter: the whole averaged gradient
    control=averaged_elements_held(all_reduced_held, 0) / elements,
    low=0.49,
    high=0.51,  # an even flat split: half, give or take one padding element
    grad_bytes_share=share(zero2_bytes, "grads"),
    optimizer_share=share(zero2_bytes, "optimizer"),
    params_share=share(zero2_bytes, "params"),
    **details,
)
_claims.between(
    "ddp_buckets_add_a_gradient_copy",
    measured=bucket_copy_bytes(bucketed, bucketed_buckets) / full_copy["grads"],  # default: buckets beside the grads
    control=bucket_copy_bytes(viewed, viewed_buckets) / full_copy["grads"],  # gradient_as_bucket_view=True
    low=0.99,
    high=1.01,
    bucket_tensor_bytes=sorted(bucketed_buckets.values()),  # the flat buckets the hook received
    bucket_sizes=bucketed._get_ddp_logging_data()["bucket_sizes"],  # what the reducer's logger reports
    share_of_one_copy=bucket_copy_bytes(bucketed, bucketed_buckets) / sum(full_copy.values()),
)
_claims.at_most(
    "zero3_shards_parameters",
    # the largest of this rank's parameter, gradient and Adam-state shares: all three must be about half
    measured=max(share(zero3_bytes, part) for part in ("params", "grads", "optimizer")),
    control=max(share(ddp_bytes, part) for part in ("params", "grads", "optimizer")),  # DDP: full replicas
    tolerance=0.55,  # dim-0 shards of each tensor: about half (odd row counts round up on rank 0)
    params_share=share(zero3_bytes, "params"),
    grads_share=share(zero3_bytes, "grads"),
    optimizer_share=share(zero3_bytes, "optimizer"),
    **details,
)
_claims.at_most(
    "zero2_step_matches_ddp",
    measured=(weights(zero2) - weights(ddp)).abs().max().item(),  # after the all-gather, vs DDP after its step
    control=(weights(zero2_alone) - weights(ddp)).abs().max().item(),  # no reduce-scatter: own gradient only
    tolerance=1e-6,  # the same sum and the same elementwise Adam: float rounding at most
)
_claims.between(
    "fsdp_zero2_frees_unowned_gradient_in_backward",
    measured=zero2_fsdp_grad_share,  # after backward, before the optimizer step
    control=no_sync_grad_share,  # the same model with no reduce-scatter in backward
    low=0.49,
    high=0.51,
)
_claims.between(
    "fsdp_saves_the_same_activations_as_ddp",
    measured=zero3_activation_share,  # FSDP2's saved activations over DDP's, same per-rank batch
    control=recomputed_activation_share,  # the same FSDP2 model with its whole forward recomputed in backward
    low=0.99,
    high=1.01,
    saved_activation_bytes={"ddp": ddp_activations, "fsdp2": zero3_activations, "fsdp2_recomputed": recomputed_activations},
)
