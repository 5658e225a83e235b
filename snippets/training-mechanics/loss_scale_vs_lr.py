# Scaling the loss by k is not scaling the learning rate by k once weight decay (or Adam) is involved.
# A small MLP trains 3 steps under DDP on 2 ranks, once with loss x 8 at lr and once with loss x 1 at 8 lr,
# and the two updates (final weights minus initial weights) are compared:
# - SGD (momentum 0.9) with weight_decay: the decay term lr * wd * w is added after backprop, so it is not
#   scaled by the loss: the two runs differ. Control: the same runs with weight_decay=0 agree. Loss x 8 at lr
#   is lr x 8 with weight_decay / 8 (control: weight_decay kept).
# - AdamW: Adam divides by the root of its second moment, so loss x 8 changes nothing, while lr x 8 makes the
#   update 8x larger. Control: the same AdamW run at lr x 8.
# - torch.optim.Adam(weight_decay=...) adds wd * w to the gradient (L2, its default coupling), so loss x 8
#   shrinks the decay's share of the normalised step: the update changes. Control: decoupled_weight_decay=True.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/training-mechanics/loss_scale_vs_lr.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import torch
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
K = 8
STEPS = 3


torch.manual_seed(0)
model = accelerator.prepare(torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)))
START = {name: value.clone() for name, value in model.state_dict().items()}


def update(make_optimizer, lr, loss_scale):
    """Final minus initial weights after STEPS DDP steps from the same weights on the same data (one DDP
    model reused: a fresh torch optimizer per run)."""
    model.load_state_dict(START)
    start = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    optimizer = make_optimizer(model.parameters(), lr)
    generator = torch.Generator().manual_seed(100 + accelerator.process_index)
    for _ in range(STEPS):
        inputs, targets = torch.randn(32, 16, generator=generator), torch.randint(0, 4, (32,), generator=generator)
        optimizer.zero_grad()
        accelerator.backward(loss_scale * torch.nn.functional.cross_entropy(model(inputs), targets))
        optimizer.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()]) - start


def relative_difference(first, second):
    return ((first - second).norm() / second.norm()).item()


def loss_scaled_vs_lr_scaled(make_optimizer, lr):
    """Loss x K at lr against loss x 1 at K * lr: the two recipes the wrong answer calls the same."""
    return relative_difference(update(make_optimizer, lr, loss_scale=K), update(make_optimizer, K * lr, loss_scale=1.0))


def sgd(weight_decay):
    return lambda params, lr: torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=weight_decay)


WEIGHT_DECAY = 5e-4
loss_scaled = update(sgd(WEIGHT_DECAY), 0.01, loss_scale=K)
lr_scaled = update(sgd(WEIGHT_DECAY), K * 0.01, loss_scale=1.0)
_claims.at_least(
    "sgd_weight_decay_breaks_the_equivalence",
    measured=relative_difference(loss_scaled, lr_scaled),
    control=loss_scaled_vs_lr_scaled(sgd(weight_decay=0.0), lr=0.01),  # the same two runs without weight decay
    bound=1e-3,
    k=K,
    steps=STEPS,
    weight_decay=WEIGHT_DECAY,
)
_claims.at_most(
    "sgd_loss_scale_divides_weight_decay_by_k",
    measured=relative_difference(loss_scaled, update(sgd(WEIGHT_DECAY / K), K * 0.01, loss_scale=1.0)),
    control=relative_difference(loss_scaled, lr_scaled),  # weight_decay kept
    tolerance=1e-5,
)


def adamw(params, lr):
    return torch.optim.AdamW(params, lr=lr)  # weight_decay left at its default


adamw_base = update(adamw, 1e-3, loss_scale=1.0)
_claims.at_most(
    "adamw_ignores_the_loss_scale",
    measured=relative_difference(update(adamw, 1e-3, loss_scale=K), adamw_base),
    control=relative_difference(update(adamw, K * 1e-3, loss_scale=1.0), adamw_base),  # lr x 8 instead
    tolerance=1e-3,
    adamw_default_weight_decay=torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))]).defaults["weight_decay"],
)


def adam_l2(params, lr):
    return torch.optim.Adam(params, lr=lr, weight_decay=0.1)  # coupling left at its default


def adam_decoupled(params, lr):
    return torch.optim.Adam(params, lr=lr, weight_decay=0.1, decoupled_weight_decay=True)


def loss_scale_effect(make_optimizer):
    return relative_difference(update(make_optimizer, 1e-3, loss_scale=K), update(make_optimizer, 1e-3, loss_scale=1.0))


_claims.at_least(
    "adam_l2_decay_changes_with_the_loss_scale",
    measured=loss_scale_effect(adam_l2),
    control=loss_scale_effect(adam_decoupled),  # the same Adam with decoupled_weight_decay=True
    bound=1e-2,
)
