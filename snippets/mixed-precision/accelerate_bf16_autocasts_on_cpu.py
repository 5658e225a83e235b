# Accelerator(mixed_precision="bf16") on a CPU does autocast: the bf16 branch of
# Accelerator.__init__ sets native_amp = True for device types cpu/xpu/hpu (is_bf16_available()
# elsewhere), prepare() replaces the model's forward with
# convert_outputs_to_fp32(torch.autocast("cpu", dtype=torch.bfloat16)(forward)), and no GradScaler
# is built (bf16 has float32's exponent range).
# Controls: the model's original forward (unwrap_model(..., keep_fp32_wrapper=False) puts it back);
# the autocast part alone, without convert_outputs_to_fp32.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/mixed-precision/accelerate_bf16_autocasts_on_cpu.py
import torch
from accelerate import Accelerator

import _claims

accelerator = Accelerator(mixed_precision="bf16")
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
seen = []
net[0].register_forward_hook(lambda module, args, output: seen.append(str(output.dtype)))
model, optimizer = accelerator.prepare(net, torch.optim.SGD(net.parameters(), lr=0.1))
inputs = torch.randn(8, 16)

out = model(inputs)  # the prepared (DDP) model: forward under bf16 autocast
loss = out.square().mean()
accelerator.backward(loss)
optimizer.step()
inner_forward_dtype = seen[-1]
with accelerator.autocast():  # the same autocast, around the original forward, without the fp32 cast
    raw = net._original_forward(inputs)
original = accelerator.unwrap_model(model, keep_fp32_wrapper=False)(inputs)  # control: forward restored
_claims.equal(
    "bf16_on_cpu_autocasts_inside_forward",
    measured=inner_forward_dtype,
    control=seen[-1],  # the first Linear in the restored original forward
    expected="torch.bfloat16",
    native_amp=accelerator.native_amp,
    scaler=repr(accelerator.scaler),  # None: bf16 needs no loss scaling
    weight_and_grad=[str(net[0].weight.dtype), str(net[0].weight.grad.dtype)],
)
_claims.equal(
    "bf16_outputs_come_back_fp32",
    measured=str(out.dtype),
    control=str(raw.dtype),  # control: autocast without convert_outputs_to_fp32
    expected="torch.float32",
    loss_dtype=str(loss.dtype),
    restored_forward_output=str(original.dtype),
)
