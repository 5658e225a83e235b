# Gradient accumulation under FSDP2: `set_requires_gradient_sync(False)` (FSDP1's `no_sync`) skips the
# reduce-scatter for the first k-1 micro-batches, and the k-th one reduces the summed gradient once.
# The steps equal one process on the big batch. The price: between micro-batches every rank holds the
# UNSHARDED gradient (the whole model's worth), instead of its half after a reduce-scatter.
# The all-gathers stay: with reshard_after_forward left out, fully_shard frees each unit's parameters after
# forward and gathers them again in backward, with or without the sync.
# Negative controls: the same loop syncing every micro-batch (k reduce-scatters, half-size gradients);
# the loss not divided by k (a k-times too large step); reshard_after_forward=False (one gather per unit).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/sharded-training/fsdp_accumulation_no_sync.py
import contextlib
import copy

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor

import _claims

K, MICRO, LR = 4, 4, 0.1  # 4 micro-batches of 4 samples per rank, 2 ranks: one step on 32 samples
accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
mesh = init_device_mesh("cpu", (world,))
set_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
inputs, targets = torch.randn(K * MICRO * world, 16), torch.randn(K * MICRO * world, 1)
elements = sum(p.numel() for p in model.parameters())


@contextlib.contextmanager
def count_calls(name, counter):
    original = getattr(dist, name)  # reduce_scatter_single / all_gather_single: what FSDP2's defaults call

    def counted(*args, **kwargs):
        counter.append(1)
        return original(*args, **kwargs)

    setattr(dist, name, counted)
    try:
        yield
    finally:
        setattr(dist, name, original)


def held_gradient_elements(net):
    """Gradient elements this rank stores right now (sharded .grad plus FSDP's unsharded accumulation),
    counted by the storage behind them: a shard that FSDP2 padded to rank 0's size counts with its padding."""
    storages = {}

    def hold(tensor):
        if tensor is not None:
            storage = tensor.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes() // tensor.element_size()

    for module in net.modules():
        if isinstance(module, FSDPModule):
            for group in module._get_fsdp_state()._fsdp_param_groups:  # private: FSDP2's parameter groups
                for fsdp_param in group.fsdp_params:
                    hold(fsdp_param._unsharded_param.grad)  # the full tensor used in forward/backward
                    hold(fsdp_param.unsharded_accumulated_grad)
                    sharded_grad = fsdp_param.sharded_param.grad
                    hold(sharded_grad.to_local() if sharded_grad is not None else None)
    return sum(storages.values())


def full_weights(net):
    return torch.cat([(p.full_tensor() if isinstance(p, DTensor) else p).detach().flatten() for p in net.parameters()])


def train(skip_sync=True, divide=True, reshard_after_forward=None):
    net = copy.deepcopy(model)
    # None leaves reshard_after_forward out of the two units with parameters: fully_shard's default decides
    given = {} if reshard_after_forward is None else {"reshard_after_forward": reshard_after_forward}
    fully_shard(net[0], mesh=mesh, **given)
    fully_shard(net[2], mesh=mesh, **given)
    fully_shard(net, mesh=mesh)
    optimizer = torch.optim.SGD(net.parameters(), lr=LR)
    reduce_scatters, all_gathers, held_after_first = [], [], None
    my_samples = slice(rank * K * MICRO, (rank + 1) * K * MICRO)
    xs, ys = inputs[my_samples].chunk(K), targets[my_samples].chunk(K)
    with count_calls("reduce_scatter_single", reduce_scatters), count_calls("all_gather_single", all_gathers):
        for i, (x, y) in enumerate(zip(xs, ys)):
            last = i == K - 1
            net.set_requires_gradient_sync(last or not skip_sync)  # FSDP2's no_sync
            loss = torch.nn.functional.mse_loss(net(x), y)
            (loss / K if divide else loss).backward()
            if i == 0:
                held_after_first = held_gradient_elements(net)
    local_shard_elements = sum(p.to_local().numel() for p in net.parameters())  # this rank's rows, unpadded
    optimizer.step()  # one step per window
    return full_weights(net), len(reduce_scatters), held_after_first, len(all_gathers), local_shard_elements


# Reference: one process, one SGD step on all 32 samples
reference = copy.deepcopy(model)
torch.nn.functional.mse_loss(reference(inputs), targets).backward()
torch.optim.SGD(reference.parameters(), lr=LR).step()
reference_weights = torch.cat([p.detach().flatten() for p in reference.parameters()])

accumulated, rs_no_sync, held_no_sync, ag_no_sync, local_elements = train()
synced, rs_every, held_every, ag_every, _ = train(skip_sync=False)
undivided, _, _, _, _ = train(divide=False)
_, _, _, ag_kept_no_sync, _ = train(reshard_after_forward=False)
_, _, _, ag_kept_every, _ = train(skip_sync=False, reshard_after_forward=False)

_claims.at_most(
    "no_sync_accumulation_matches_big_batch",
    measured=(accumulated - reference_weights).abs().max().item(),
    control=(undivided - reference_weights).abs().max().item(),  # loss not divided by k
    tolerance=1e-6,
    synced_every_micro_batch_diff=(synced - reference_weights).abs().max().item(),
)
_claims.equal(
    "no_sync_reduces_once_per_window",
    measured=rs_no_sync,
    control=rs_every,  # sync on every micro-batch
    expected=2,  # 2 FSDP units with parameters, one reduce-scatter each, once per window
    micro_batches=K,
    all_gathers_no_sync=ag_no_sync,  # the all-gathers run every micro-batch either way
    all_gathers_synced=ag_every,
)
_claims.equal(
    "no_sync_keeps_the_all_gathers",
    measured=[ag_no_sync, ag_every],  # reshard_after_forward left out: each unit gathered in forward and backward
    control=[ag_kept_no_sync, ag_kept_every],  # reshard_after_forward=False: gathered once per micro-batch
    expected=[2 * K * 2, 2 * K * 2],  # 2 units x 4 micro-batches x (forward + backward), with or without sync
)
_claims.at_least(
    "no_sync_holds_unsharded_gradients",
    measured=held_no_sync / elements,  # gradient elements held between micro-batches / model elements
    control=held_every / elements,  # synced: only this rank's shard of the gradient
    bound=0.99,
    model_elements=elements,
    held_elements_no_sync=held_no_sync,
    held_elements_synced=held_every,
    local_shard_elements=local_elements,  # this rank's rows of the parameters, before padding
)
