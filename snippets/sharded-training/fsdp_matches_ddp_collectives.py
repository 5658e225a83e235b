# Sharded training computes the same steps as DDP; only the communication changes. The same tiny MLP
# trains 3 Adam steps on 2 ranks three ways: DDP, DDP + ZeroRedundancyOptimizer (ZeRO-1), and FSDP2
# `fully_shard` (ZeRO-3), the latter wrapped two ways (one unit per Linear, then the root; the root alone).
# We compare the final weights and count the collectives each makes per step.
# Negative controls: each rank training alone on its half of the batch (no gradient exchange at all)
# for the weights (for the two wrappings: the model left unwrapped, each rank alone); DDP's step for
# the reduce-scatter and all-reduce counts (one all-reduce, no reduce-scatter); the same FSDP2 units
# with reshard_after_forward=False for the all-gathers. The root-only unit, its reshard_after_forward left
# out, is gathered once per step (the default keeps a root's parameters from forward to backward);
# control: the same unit with reshard_after_forward=True, gathered twice.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/sharded-training/fsdp_matches_ddp_collectives.py
import contextlib
import copy
from collections import Counter

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel as DDP

import _claims

STEPS, TOLERANCE = 3, 1e-5  # float rounding leaves ~1e-7; a missing gradient exchange ~1e-2
COLLECTIVES = ("all_reduce", "all_gather_single", "all_gather_into_tensor", "reduce_scatter_single",
               "reduce_scatter_tensor", "broadcast")  # fmt: skip

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
set_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(32, 128), torch.nn.Tanh(), torch.nn.Linear(128, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2)
)
batches = [(torch.randn(16, 32), torch.randn(16, 2)) for _ in range(STEPS)]
my_rows = slice(rank * 8, rank * 8 + 8)  # each rank trains on its half of every batch


@contextlib.contextmanager
def count_collectives(counts):
    """Wrap torch.distributed's Python collectives (FSDP2 and ZeroRedundancyOptimizer call them)."""
    originals = {name: getattr(dist, name) for name in COLLECTIVES}

    def wrap(name, function):
        def counted(*args, **kwargs):
            counts[name] += 1
            return function(*args, **kwargs)

        return counted

    for name, function in originals.items():
        setattr(dist, name, wrap(name, function))
    try:
        yield counts
    finally:
        for name, function in originals.items():
            setattr(dist, name, function)


def full_weights(net):
    """All weights as one vector; a sharded DTensor is gathered first (full_tensor)."""
    return torch.cat([(p.full_tensor() if isinstance(p, DTensor) else p).detach().flatten() for p in net.parameters()])


def train(net, optimizer, counts=None):
    for step, (x, y) in enumerate(batches):
        with count_collectives(counts if step == STEPS - 1 else Counter()):  # count the last step only
            torch.nn.functional.mse_loss(net(x[my_rows]), y[my_rows]).backward()
            optimizer.step()
            optimizer.zero_grad()
    return full_weights(net)


# DDP, with a comm hook counting the all-reduces its C++ reducer makes (they bypass dist.all_reduce)
ddp = DDP(copy.deepcopy(model))
ddp_counts = Counter()


def counting_hook(state, bucket):
    ddp_counts["all_reduce"] += 1
    return allreduce_hook(state, bucket)


ddp.register_comm_hook(state=None, hook=counting_hook)
ddp_py_counts = Counter()  # what DDP's step calls through torch.distributed's Python functions
ddp_weights = train(ddp, torch.optim.Adam(ddp.parameters(), lr=1e-2), ddp_py_counts)
ddp_allreduces_per_step = ddp_counts["all_reduce"] / STEPS

# ZeRO-1: the same DDP, the optimizer state sharded
zero1 = DDP(copy.deepcopy(model))
zero1_counts = Counter()
zero1_weights = train(zero1, ZeroRedundancyOptimizer(zero1.parameters(), torch.optim.Adam, lr=1e-2), zero1_counts)

# ZeRO-3 / FSDP2: one unit per Linear, then the root
mesh = init_device_mesh("cpu", (world,))
fsdp = copy.deepcopy(model)
units = [layer for layer in fsdp if isinstance(layer, torch.nn.Linear)]
for layer in units:
    fully_shard(layer, mesh=mesh, reshard_after_forward=True)
fully_shard(fsdp, mesh=mesh)
fsdp_counts = Counter()
fsdp_weights = train(fsdp, torch.optim.Adam(fsdp.parameters(), lr=1e-2), fsdp_counts)
# Another wrapping of the same model: fully_shard on the root only, one unit holding every parameter
root_only = copy.deepcopy(model)
fully_shard(root_only, mesh=mesh)  # reshard_after_forward left out: the default for a root unit
root_only_counts = Counter()
root_only_weights = train(root_only, torch.optim.Adam(root_only.parameters(), lr=1e-2), root_only_counts)
# Control for the root's default: the same root-only unit with reshard_after_forward=True
root_resharded = copy.deepcopy(model)
fully_shard(root_resharded, mesh=mesh, reshard_after_forward=True)
root_resharded_counts = Counter()
train(root_resharded, torch.optim.Adam(root_resharded.parameters(), lr=1e-2), root_resharded_counts)
# Control for the all-gathers: the same FSDP2 units with reshard_after_forward=False (kept until backward)
kept = copy.deepcopy(model)
for layer in kept:
    if isinstance(layer, torch.nn.Linear):
        fully_shard(layer, mesh=mesh, reshard_after_forward=False)
fully_shard(kept, mesh=mesh)
kept_counts = Counter()
train(kept, torch.optim.Adam(kept.parameters(), lr=1e-2), kept_counts)

# Control: each rank alone on its half batch, nothing exchanged
alone = copy.deepcopy(model)
alone_weights = train(alone, torch.optim.Adam(alone.parameters(), lr=1e-2))


def worst_over_ranks(value):
    value = torch.tensor([value])
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return value.item()


control = worst_over_ranks((alone_weights - ddp_weights).abs().max().item())
_claims.at_most(
    "fsdp_weights_match_ddp",
    measured=worst_over_ranks((fsdp_weights - ddp_weights).abs().max().item()),
    control=control,
    tolerance=TOLERANCE,
    steps=STEPS,
    optimizer="Adam lr=1e-2",
)
_claims.at_most(
    "zero1_weights_match_ddp",
    measured=worst_over_ranks((zero1_weights - ddp_weights).abs().max().item()),
    control=control,
    tolerance=TOLERANCE,
    steps=STEPS,
)
_claims.at_most(
    "fsdp_weights_independent_of_wrapping",
    # one unit per Linear, then the root, against one unit for the whole model
    measured=worst_over_ranks((fsdp_weights - root_only_weights).abs().max().item()),
    # the same comparison with the wrapping removed from one side: the model unwrapped, each rank alone
    control=worst_over_ranks((alone_weights - root_only_weights).abs().max().item()),
    tolerance=TOLERANCE,
    steps=STEPS,
    units_per_linear_wrapping=len(units),
    units_root_only_wrapping=1,
)
collectives_detail = dict(
    fsdp_last_step=dict(fsdp_counts),
    zero1_last_step=dict(zero1_counts),
    ddp_allreduces_per_step=ddp_allreduces_per_step,
    fsdp_units=len(units),
    ddp_python_collectives_last_step=dict(ddp_py_counts),
)
_claims.equal(
    "fsdp_reduce_scatter_replaces_allreduce",
    measured=[fsdp_counts["reduce_scatter_single"] + fsdp_counts["reduce_scatter_tensor"], fsdp_counts["all_reduce"]],
    # DDP's step, the same counts: reduce-scatters through torch.distributed, all-reduces via its hook
    control=[ddp_py_counts["reduce_scatter_single"] + ddp_py_counts["reduce_scatter_tensor"], ddp_allreduces_per_step],
    expected=[len(units), 0],  # one reduce-scatter per FSDP unit, no all-reduce
    **collectives_detail,
)
ddp_all_gathers = ddp_py_counts["all_gather_single"] + ddp_py_counts["all_gather_into_tensor"]
_claims.equal(
    "fsdp_all_gathers_per_step",
    # [FSDP2's step, DDP's step]
    measured=[fsdp_counts["all_gather_single"] + fsdp_counts["all_gather_into_tensor"], ddp_all_gathers],
    # the same units with reshard_after_forward=False: gathered once, kept until backward
    control=[kept_counts["all_gather_single"] + kept_counts["all_gather_into_tensor"], ddp_all_gathers],
    expected=[2 * len(units), 0],  # each unit: once before forward, again before backward (resharded); DDP none
    **collectives_detail,
)
_claims.equal(
    "root_unit_stays_gathered_by_default",
    measured=root_only_counts["all_gather_single"] + root_only_counts["all_gather_into_tensor"],
    control=root_resharded_counts["all_gather_single"] + root_resharded_counts["all_gather_into_tensor"],
    expected=1,  # gathered before forward and kept until backward
)
_claims.at_least(
    "zero1_broadcasts_updated_parameters",
    measured=zero1_counts["broadcast"],  # each rank sends the parameters it updated to the other
    control=ddp_py_counts["broadcast"],  # DDP's step: every rank updates all parameters itself
    bound=1,
    **collectives_detail,
)
