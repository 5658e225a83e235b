# Why LARS and LAMB scale each layer's step: one optimizer step on a small MLP under DDP (2 ranks),
# with the update applied layer by layer. Plain SGD moves each weight matrix by lr * ||g|| relative to
# ||w||, which differs from layer to layer by the ratio of gradient to weight norms; LARS multiplies
# each layer's step by its trust ratio ||w|| / ||g||, so every layer moves by the same fraction lr of its
# norm, and a gradient k times larger (a summed instead of averaged loss, a bigger batch) changes nothing.
# LAMB does the same to Adam's update direction. Negative controls: the same SGD step on trust-ratio-scaled
# gradients (LARS), the same Adam step with its update trust-ratio-scaled (LAMB), plain SGD for the scale.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/training-mechanics/layerwise_trust_ratio.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import torch
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
LR = 0.01


def gradients(loss_scale=1.0):
    """DDP-averaged gradients of one batch, and the weight matrices they belong to (biases left out, as LARS does)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 4)
    )
    model = accelerator.prepare(model)
    generator = torch.Generator().manual_seed(10 + accelerator.process_index)
    inputs, targets = torch.randn(16, 32, generator=generator), torch.randint(0, 4, (16,), generator=generator)
    accelerator.backward(loss_scale * torch.nn.functional.cross_entropy(model(inputs), targets))
    weights = [p for p in model.parameters() if p.dim() >= 2]
    return [w.detach().clone() for w in weights], [w.grad.detach().clone() for w in weights]


def trust_scaled(weights, grads):
    """LARS's per-layer gradient: g * ||w|| / ||g|| (trust coefficient 1, no weight decay); torch has no LARS."""
    return [g * (w.norm() / g.norm()) for w, g in zip(weights, grads)]


def relative_updates(weights, grads, optimizer_class):
    """One real step of a torch optimizer with these gradients: ||w_after - w_before|| / ||w_before|| per layer."""
    params = [torch.nn.Parameter(w.clone()) for w in weights]
    for param, grad in zip(params, grads):
        param.grad = grad.clone()
    optimizer_class(params, lr=LR).step()
    return [((p.detach() - w).norm() / w.norm()).item() for p, w in zip(params, weights)]


def lamb_relative_updates(weights, grads):
    """LAMB's step: the same torch Adam step, its update rescaled per layer by the trust ratio ||w|| / ||r||,
    r = update / lr being Adam's direction (no weight decay); torch has no LAMB."""
    params = [torch.nn.Parameter(w.clone()) for w in weights]
    for param, grad in zip(params, grads):
        param.grad = grad.clone()
    torch.optim.Adam(params, lr=LR).step()
    updates = [p.detach() - w for p, w in zip(params, weights)]
    lamb = [LR * (w.norm() / (update / LR).norm()) * (update / LR) for w, update in zip(weights, updates)]
    return [(step.norm() / w.norm()).item() for step, w in zip(lamb, weights)]


def spread(values):
    return max(values) / min(values)


weights, grads = gradients()
_, grads_times_8 = gradients(loss_scale=8.0)

sgd = relative_updates(weights, grads, torch.optim.SGD)
lars = relative_updates(weights, trust_scaled(weights, grads), torch.optim.SGD)
_claims.at_least(
    "sgd_moves_layers_by_different_fractions",
    measured=spread(sgd),
    control=spread(lars),  # the same SGD step on LARS's trust-ratio-scaled gradients
    bound=5.0,
    sgd_relative_update=sgd,
    lars_relative_update=lars,
    gradient_over_weight_norm=[(g.norm() / w.norm()).item() for w, g in zip(weights, grads)],
)

adam = relative_updates(weights, grads, torch.optim.Adam)
lamb = lamb_relative_updates(weights, grads)
_claims.at_least(
    "adam_also_moves_layers_by_different_fractions",
    measured=spread(adam),
    control=spread(lamb),  # the same Adam step with LAMB's per-layer trust ratio
    bound=2.0,
    adam_relative_update=adam,
    lamb_relative_update=lamb,
    weight_norm=[w.norm().item() for w in weights],
    elements=[w.numel() for w in weights],
)


def largest_change(first, second):
    return max(abs(a / b - 1) for a, b in zip(first, second))


_claims.at_most(
    "lars_step_ignores_gradient_scale",
    measured=largest_change(lars, relative_updates(weights, trust_scaled(weights, grads_times_8), torch.optim.SGD)),
    control=largest_change(sgd, relative_updates(weights, grads_times_8, torch.optim.SGD)),  # plain SGD: 8x the step
    tolerance=1e-5,
)
