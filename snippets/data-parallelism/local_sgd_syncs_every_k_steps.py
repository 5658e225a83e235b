# Local SGD: each rank takes K optimizer steps on its own data with no gradient all-reduce, then the
# ranks average their parameters (accelerate.local_sgd.LocalSGD). The replicas drift apart between
# synchronisations and are identical right after each one; with K=1 and plain SGD the result is
# DDP's. Controls: the same loop under plain DDP (replicas equal after every step, one gradient
# all-reduce per step), and the same no_sync loop without LocalSGD's parameter averaging.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/data-parallelism/local_sgd_syncs_every_k_steps.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import torch
from accelerate import Accelerator
from accelerate.local_sgd import LocalSGD
from accelerate.utils import set_seed
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

import _claims

K = 4  # local steps between two parameter averagings
STEPS = 8
LR = 0.1

accelerator = Accelerator()
rank = accelerator.process_index


def fresh_model():
    """The same initial weights on every rank, wrapped by prepare (DDP), with a hook counting all-reduces."""
    set_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)  # plain SGD: no momentum
    model, optimizer = accelerator.prepare(model, optimizer)
    counter = {"gradient_all_reduces": 0}

    def counting_hook(state, bucket):  # the default all-reduce, counted
        counter["gradient_all_reduces"] += 1
        return allreduce_hook(None, bucket)

    model.register_comm_hook(None, counting_hook)
    return model, optimizer, counter


def batch(step):
    """Each rank its own data: rank and step pick the samples."""
    g = torch.Generator().manual_seed(1000 * rank + step)
    x = torch.randn(16, 8, generator=g)
    return x, x.sum(dim=1, keepdim=True).sin()


def replicas_identical(model):
    """True when every rank holds bit-identical parameters (gathered from all ranks)."""
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    rows = accelerator.gather(flat[None])
    return bool((rows == rows[0]).all())


def train(mode, k=K, steps=STEPS):
    """mode: 'local_sgd' (LocalSGD), 'ddp' (plain DDP) or 'no_sync' (no_sync, never averaged)."""
    model, optimizer, counter = fresh_model()
    equal_after = []

    def one_step(step):
        x, y = batch(step)
        loss = torch.nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()

    if mode == "local_sgd":
        with LocalSGD(accelerator=accelerator, model=model, local_sgd_steps=k, enabled=True) as local_sgd:
            for step in range(1, steps + 1):
                one_step(step)
                local_sgd.step()  # every k-th call averages the parameters over the ranks
                equal_after.append(step) if replicas_identical(model) else None
    else:
        context = model.no_sync() if mode == "no_sync" else torch.enable_grad()
        with context:
            for step in range(1, steps + 1):
                one_step(step)
                equal_after.append(step) if replicas_identical(model) else None
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    return equal_after, counter["gradient_all_reduces"], params


local_equal, local_all_reduces, _ = train("local_sgd")
ddp_equal, ddp_all_reduces, ddp_params = train("ddp")

_claims.equal(
    "replicas_equal_only_at_syncs",
    measured=local_equal,
    control=ddp_equal,
    expected=list(range(K, STEPS + 1, K)),
    local_sgd_steps=K,
    steps=STEPS,
)
_claims.equal(
    "no_gradient_all_reduce_between_syncs",
    measured=local_all_reduces,
    control=ddp_all_reduces,
    expected=0,
    steps=STEPS,
)

# K=1 with plain SGD: averaging the parameters after each step is averaging the gradients (DDP).
_, _, local1_params = train("local_sgd", k=1, steps=4)
_, _, ddp4_params = train("ddp", steps=4)
_, _, unsynced_params = train("no_sync", steps=4)
_claims.at_most(
    "k1_local_sgd_is_ddp",
    measured=(local1_params - ddp4_params).abs().max().item(),
    control=(unsynced_params - ddp4_params).abs().max().item(),
    tolerance=1e-6,
    steps=4,
)
