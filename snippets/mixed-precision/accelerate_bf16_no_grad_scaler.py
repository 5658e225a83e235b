# Accelerator(mixed_precision="bf16") builds no GradScaler: the bf16 branch of Accelerator.__init__ builds
# none (a scaler comes only from the fp16 branch, not on CPU, DeepSpeed or Megatron-LM, and from the fp8
# branch with MS-AMP, not under DeepSpeed), so accelerator.scaler stays None and accelerator.backward(loss) runs a plain
# loss.backward(): the gradients it leaves are those of the unscaled loss (ratio 1 to a plain backward).
# Control: the same accelerator.backward with a GradScaler on the Accelerator (what __init__ builds for
# fp16 on a GPU, GradScaler("cuda") there; GradScaler("cpu") stands in here), which scales every
# gradient by 65536.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/mixed-precision/accelerate_bf16_no_grad_scaler.py
import torch
from accelerate import Accelerator

import _claims

accelerator = Accelerator(mixed_precision="bf16")
built_scaler = repr(accelerator.scaler)  # what Accelerator.__init__ left there for bf16
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
model = accelerator.prepare(net)  # DDP, forward under bf16 autocast
inputs = torch.randn(8, 16, generator=torch.Generator().manual_seed(1 + accelerator.process_index))


def first_layer_grad(backward):
    """The first Linear's weight gradient after `backward(loss)` on the same batch."""
    model.zero_grad()
    backward(model(inputs).square().mean())
    return net[0].weight.grad.detach().clone()


plain = first_layer_grad(lambda loss: loss.backward())
through_accelerate = first_layer_grad(accelerator.backward)  # --- the mechanism: no scaler, no scaling
accelerator.scaler = torch.amp.GradScaler("cpu")  # control: a scaler on the Accelerator, as for fp16 on a GPU
with_scaler = first_layer_grad(accelerator.backward)
_claims.equal(
    "bf16_accelerator_scales_no_gradient",
    measured=(through_accelerate.abs().sum() / plain.abs().sum()).item(),
    control=(with_scaler.abs().sum() / plain.abs().sum()).item(),
    expected=1.0,
    scaler_built_for_bf16=built_scaler,
    native_amp=accelerator.native_amp,
    mixed_precision=accelerator.mixed_precision,
)
