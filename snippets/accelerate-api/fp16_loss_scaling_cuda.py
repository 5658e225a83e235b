# fp16 needs loss scaling, and Accelerate does it for you on a GPU. With mixed_precision="fp16" on
# CUDA, Accelerator creates a torch.amp.GradScaler and accelerator.backward(loss) runs
# scaler.scale(loss).backward(): the loss is multiplied by 65536 first, so gradients too small for
# float16 (below ~6e-8) survive the backward pass; the optimizer step unscales them again.
# Negative control: the same backward without the scale (plain loss.backward()) underflows to zero.
#
#   accelerate launch --multi_gpu --num_processes 2 snippets/accelerate-api/fp16_loss_scaling_cuda.py   (2 GPUs)
# On a CPU, mixed_precision="fp16" is ignored (no autocast, no scaler), so this proof needs GPUs.
import torch
from accelerate import Accelerator

import _claims

TINY = 1e-7  # d(loss)/d(output) = TINY / 32 = 3e-9 per element: 0 in float16, 2e-4 once scaled by 65536

accelerator = Accelerator(mixed_precision="fp16")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 1)).to(accelerator.device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = accelerator.prepare(model, optimizer)  # forward now runs under fp16 autocast
inputs = torch.randn(32, 64, device=accelerator.device)


def zero_gradient_fraction(backward):
    optimizer.zero_grad()
    loss = model(inputs).mean() * TINY  # the output comes back in float32; its gradient flows through fp16
    backward(loss)
    grad = accelerator.unwrap_model(model)[0].weight.grad
    return (grad == 0).float().mean().item()


scaled = zero_gradient_fraction(accelerator.backward)  # --- the mechanism: scaler.scale(loss).backward()
unscaled = zero_gradient_fraction(lambda loss: loss.backward())  # control: no loss scaling

_claims.at_most(
    "fp16_loss_scaling_keeps_small_gradients",
    measured=scaled,
    control=unscaled,
    tolerance=0.01,
    scaler=type(accelerator.scaler).__name__,
    initial_scale=accelerator.scaler.get_scale() if accelerator.scaler is not None else None,
)
