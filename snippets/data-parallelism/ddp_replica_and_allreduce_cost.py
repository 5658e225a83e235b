# What data parallelism costs, measured on 2 ranks against one process on the full batch:
#   memory: every rank holds a FULL replica of parameters, gradients and Adam state (same bytes as one
#           process; negative control: ZeroRedundancyOptimizer keeps only this rank's share of the Adam
#           state, whole tensors per rank, so each rank holds less, not necessarily half);
#   communication: each step all-reduces exactly the gradient bytes, counted by a DDP comm hook
#           (negative control: the same step under no_sync() sends nothing);
#   compute: the FLOPs of forward + backward are split between the ranks by the prepared DataLoader, not
#           duplicated (negative control: the same loop over the DataLoader without prepare, so each rank
#           runs all 48 samples: twice the work in total);
#           but optimizer.step() runs in full on every rank: N ranks do N times the optimizer arithmetic
#           of one process (negative control: ZeroRedundancyOptimizer, where each rank steps only its
#           own share of the parameters: the redundancy ZeRO removes).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/data-parallelism/ddp_replica_and_allreduce_cost.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import copy

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.flop_counter import FlopCounterMode

import _claims

BATCH = 48  # splits evenly over 2, 3 or 4 ranks
accelerator = Accelerator()
set_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1)
).to(accelerator.device)
inputs = torch.randn(BATCH, 32, device=accelerator.device)
targets = torch.randn(BATCH, 1, device=accelerator.device)
single, zero_copy = copy.deepcopy(model), copy.deepcopy(model)


def nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def replica_bytes(module, optimizer):
    """Bytes this process keeps for training: weights + gradients + optimizer state (Adam: 2 moments + step)."""
    params = list(module.parameters())
    state = [t for s in optimizer.state.values() for t in s.values() if torch.is_tensor(t)]
    return {"params": nbytes(params), "grads": nbytes(p.grad for p in params), "optimizer": nbytes(state)}


class ElementOps(TorchDispatchMode):
    """Counts the tensor elements every aten op produces: a measure of element-wise arithmetic such as
    an optimizer's (FlopCounterMode counts only matmuls and convolutions). Collectives are communication
    and views (detach, view) compute nothing, so neither is counted."""

    def __init__(self):
        super().__init__()
        self.elements = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.namespace != "c10d" and not func.is_view:
            self.elements += sum(t.numel() for t in tree_leaves(out) if isinstance(t, torch.Tensor))
        return out


def train_step(module, optimizer, x, y):
    """One forward + backward + step; returns the FLOPs of forward + backward and the step's element ops."""
    optimizer.zero_grad()
    with FlopCounterMode(display=False) as counter:
        accelerator.backward(torch.nn.functional.mse_loss(module(x), y))
    with ElementOps() as step_ops:
        optimizer.step()
    return counter.get_total_flops(), step_ops.elements


# Reference: ONE process, full batch of 48, plain Adam.
single_optimizer = torch.optim.Adam(single.parameters())
single_flops, single_step_ops = train_step(single, single_optimizer, inputs, targets)
single_bytes = replica_bytes(single, single_optimizer)

# --- data parallel: DDP + Adam; the prepared DataLoader gives each rank its share (2 ranks: 24 of 48) ---
rank, world = accelerator.process_index, accelerator.num_processes
half = slice(rank * BATCH // world, (rank + 1) * BATCH // world)  # for the ZeRO control below
dataset = TensorDataset(inputs, targets)
ddp_model, optimizer, loader = accelerator.prepare(
    model, torch.optim.Adam(model.parameters()), DataLoader(dataset, batch_size=BATCH // world)
)

bytes_sent = []  # one entry per bucket DDP hands to all-reduce


def counting_allreduce(state, bucket):
    bytes_sent.append(bucket.buffer().numel() * bucket.buffer().element_size())
    return allreduce_hook(state, bucket)  # torch's reference hook, same result as DDP's built-in average


ddp_model.register_comm_hook(None, counting_allreduce)
rank_flops = rank_step_ops = rank_samples = 0
for x, y in loader:  # one batch per rank: the global batch of 48 is one step
    flops, step_ops = train_step(ddp_model, optimizer, x, y)
    rank_flops, rank_step_ops, rank_samples = rank_flops + flops, rank_step_ops + step_ops, rank_samples + len(x)
rank_bytes = replica_bytes(accelerator.unwrap_model(ddp_model), optimizer)
step_bytes_sent, buckets = sum(bytes_sent), len(bytes_sent)

# Control for communication: the same step over the prepared DataLoader under no_sync (forward inside it).
bytes_sent.clear()
with ddp_model.no_sync():
    for x, y in loader:
        train_step(ddp_model, optimizer, x, y)
no_sync_bytes_sent = sum(bytes_sent)

# Control for compute: the same loop over the DataLoader without prepare (no sharding: all 48 samples).
unsharded_flops = 0
for x, y in DataLoader(dataset, batch_size=BATCH // world):
    flops, _ = train_step(ddp_model, optimizer, x, y)
    unsharded_flops += flops

# Control for memory: ZeRO-1 keeps only this rank's share of the Adam state.
zero_model = accelerator.prepare(zero_copy)
zero_optimizer = ZeroRedundancyOptimizer(zero_copy.parameters(), optimizer_class=torch.optim.Adam)
_, zero_step_ops = train_step(zero_model, zero_optimizer, inputs[half], targets[half])
zero_bytes = replica_bytes(zero_copy, zero_optimizer.optim)

# Sum the work of both ranks (a collective: every rank takes part).
work = torch.tensor([rank_flops, unsharded_flops, rank_step_ops, zero_step_ops], dtype=torch.float64,
                    device=accelerator.device)
dist.all_reduce(work)
total_flops, total_if_replicated, total_step_ops, total_zero_step_ops = (int(w) for w in work)

grad_bytes = single_bytes["grads"]
_claims.equal(
    "full_replica_per_rank",
    measured=sum(rank_bytes.values()),
    control=sum(zero_bytes.values()),
    expected=sum(single_bytes.values()),
    per_rank=rank_bytes,
    single_process=single_bytes,
    zero_per_rank=zero_bytes,
)
_claims.equal(
    "allreduce_bytes_equal_gradient_bytes",
    measured=step_bytes_sent,
    control=no_sync_bytes_sent,
    expected=grad_bytes,
    buckets=buckets,
    parameters=sum(p.numel() for p in single.parameters()),
)
_claims.equal(
    "flops_split_not_duplicated",
    measured=total_flops,
    control=total_if_replicated,
    expected=single_flops,
    flops_this_rank=rank_flops,
    samples_this_rank=rank_samples,
)
_claims.equal(
    "optimizer_step_repeated_on_every_rank",
    measured=total_step_ops,
    control=total_zero_step_ops,
    expected=accelerator.num_processes * single_step_ops,
    single_process_step_element_ops=single_step_ops,
    this_rank_step_element_ops=rank_step_ops,
    this_rank_zero_step_element_ops=zero_step_ops,
)
