# Local SGD: each rank takes K optimizer steps on its own data with no gradient all-reduce, then the
# ranks average their parameters (accelerate.local_sgd.LocalSGD). The replicas drift apart between
# synchronisations and are identical right after each one; with K=1 and plain SGD the result is
# DDP's, and so it is with momentum (the momentum update is linear in the gradient), but not with Adam.
# Controls: the same loop under plain DDP (replicas equal after every step, one gradient all-reduce per
# step), the same no_sync loop without LocalSGD's parameter averaging, and for Adam the same comparison
# with SGD momentum in its place.
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


def plain_sgd(params):
    return torch.optim.SGD(params, lr=LR)  # no momentum


def momentum_sgd(params):
    return torch.optim.SGD(params, lr=LR, momentum=0.9)


def adam(params):
    return torch.optim.Adam(params, lr=0.01)


def fresh_model(make_optimizer=plain_sgd):
    """The same initial weights on every rank, wrapped by prepare (DDP), with a hook counting all-reduces."""
    set_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = make_optimizer(model.parameters())
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


def train(mode, k=K, steps=STEPS, make_optimizer=plain_sgd):
    """mode: 'local_sgd' (LocalSGD), 'ddp' (plain DDP) or 'no_sync' (no_sync, never averaged)."""
    model, optimizer, counter = fresh_model(make_optimizer)
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

# The same with momentum: each rank keeps its own momentum buffer (LocalSGD averages parameters only), but
# the buffer is linear in the gradients, so averaging the parameters after each step still gives DDP's.
_, _, momentum_local1 = train("local_sgd", k=1, steps=4, make_optimizer=momentum_sgd)
_, _, momentum_ddp = train("ddp", steps=4, make_optimizer=momentum_sgd)
_, _, momentum_unsynced = train("no_sync", steps=4, make_optimizer=momentum_sgd)
momentum_distance = (momentum_local1 - momentum_ddp).abs().max().item()
_claims.at_most(
    "k1_momentum_sgd_is_ddp",
    measured=momentum_distance,
    control=(momentum_unsynced - momentum_ddp).abs().max().item(),
    tolerance=1e-6,
    steps=4,
    momentum=0.9,
)

# Adam: per-rank moments and a per-coordinate division by sqrt(v), not linear in the gradients, so
# averaging the parameters after each step is not DDP's Adam step.
_, _, adam_local1 = train("local_sgd", k=1, steps=4, make_optimizer=adam)
_, _, adam_ddp = train("ddp", steps=4, make_optimizer=adam)
_claims.at_least(
    "k1_adam_is_not_ddp",
    measured=(adam_local1 - adam_ddp).abs().max().item(),
    control=momentum_distance,  # the same comparison with SGD momentum (state linear in the gradients)
    bound=1e-3,
    steps=4,
    adam_lr=0.01,
)
