# Momentum correction (Goyal et al., section 3): when the learning rate jumps, an optimizer that keeps the
# velocity v = m*v + lr*g (lr absorbed into the history) must rescale v by lr_new/lr_old to stay the same
# algorithm as the reference form u = m*u + g, w -= lr*u, which torch.optim.SGD implements.
# A small MLP trains 6 DDP steps on 2 ranks (momentum 0.9) with the lr raised 10x after step 3 (the end of a
# warmup) by a torch LambdaLR scheduler; the same run is repeated with a hand-written velocity optimizer,
# with and without the correction. Negative control: the same velocity optimizer without the correction.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/training-mechanics/momentum_correction.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import torch
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
MOMENTUM = 0.9
BASE_LR = 0.01
JUMP_AT = 3  # steps at BASE_LR before the lr becomes 10x larger
STEPS = 6

torch.manual_seed(0)
model = accelerator.prepare(torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)))
START = {name: value.clone() for name, value in model.state_dict().items()}


def lr_factor(step):
    return 1.0 if step < JUMP_AT else 10.0


class VelocitySGD(torch.optim.Optimizer):
    """The variant that absorbs lr into the history: v = m * (lr / previous lr if corrected) * v + lr * g; w -= v."""

    def __init__(self, params, lr, corrected):
        super().__init__(params, {"lr": lr})
        self.corrected = corrected

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for param in group["params"]:
                state = self.state[param]
                if "velocity" not in state:
                    state["velocity"] = group["lr"] * param.grad.clone()
                else:
                    correction = group["lr"] / state["lr"] if self.corrected else 1.0
                    state["velocity"].mul_(MOMENTUM * correction).add_(param.grad, alpha=group["lr"])
                state["lr"] = group["lr"]
                param.sub_(state["velocity"])


def trajectory(make_optimizer):
    """The weights after every step and the size of every step, from the same start on the same data."""
    model.load_state_dict(START)
    optimizer = make_optimizer(model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    generator = torch.Generator().manual_seed(100 + accelerator.process_index)
    steps = []
    for _ in range(STEPS):
        before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
        inputs, targets = torch.randn(32, 16, generator=generator), torch.randint(0, 4, (32,), generator=generator)
        optimizer.zero_grad()
        accelerator.backward(torch.nn.functional.cross_entropy(model(inputs), targets))
        optimizer.step()
        scheduler.step()
        steps.append(torch.cat([p.detach().flatten() for p in model.parameters()]) - before)
    return torch.cat([p.detach().flatten() for p in model.parameters()]), steps


torch_final, torch_steps = trajectory(lambda params: torch.optim.SGD(params, lr=BASE_LR, momentum=MOMENTUM))
corrected_final, corrected_steps = trajectory(lambda params: VelocitySGD(params, BASE_LR, corrected=True))
uncorrected_final, uncorrected_steps = trajectory(lambda params: VelocitySGD(params, BASE_LR, corrected=False))


def relative_difference(first, second):
    return ((first - second).norm() / second.norm()).item()


_claims.at_most(
    "corrected_velocity_matches_torch_sgd",
    measured=relative_difference(corrected_final, torch_final),
    control=relative_difference(uncorrected_final, torch_final),  # the same velocity optimizer, no correction
    tolerance=1e-5,
    steps=STEPS,
    lr_jump_after_step=JUMP_AT,
)


def first_step_after_jump_ratio(steps):
    """Size of the first step at the new lr, relative to torch.optim.SGD's."""
    return (steps[JUMP_AT].norm() / torch_steps[JUMP_AT].norm()).item()


_claims.at_most(
    "uncorrected_first_step_is_too_small",
    measured=first_step_after_jump_ratio(uncorrected_steps),
    control=first_step_after_jump_ratio(corrected_steps),  # with the correction: the same step as torch's
    tolerance=0.7,
    torch_step_sizes=[s.norm().item() for s in torch_steps],
    uncorrected_step_sizes=[s.norm().item() for s in uncorrected_steps],
)
