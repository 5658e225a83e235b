# Accelerator(mixed_precision="fp16") on a CPU: no error, no warning, and no effect. The fp16 branch
# of Accelerator.__init__ requires `self.device.type != "cpu"`, so on a CPU native_amp stays False
# and no GradScaler is built; prepare() then leaves forward alone (it wraps it in autocast only when
# native_amp is True), and accelerator.backward is a plain loss.backward().
# Control: the same prepared model run inside the context get_mixed_precision_context_manager would
# return for fp16 with native_amp=True: torch.autocast(device_type="cpu", dtype=torch.float16).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/mixed-precision/accelerate_fp16_ignored_on_cpu.py
import torch
from accelerate import Accelerator
from accelerate.utils import get_mixed_precision_context_manager

import _claims

accelerator = Accelerator(mixed_precision="fp16")  # --- asks for fp16 ...
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
seen = []
model[0].register_forward_hook(lambda module, args, output: seen.append(str(output.dtype)))
model, optimizer = accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
inputs = torch.randn(8, 16)

out = model(inputs)  # ... but the first Linear computes in float32
accelerator.backward(out.square().mean())
with get_mixed_precision_context_manager(native_amp=True):  # control: what a GPU run would enter
    model(inputs)
_claims.equal(
    "fp16_on_cpu_runs_without_autocast",
    measured=seen[0],
    control=seen[1],
    expected="torch.float32",
    accelerator_mixed_precision=accelerator.mixed_precision,  # still reports "fp16"
    native_amp=accelerator.native_amp,
    scaler=repr(accelerator.scaler),
    distributed_type=str(accelerator.distributed_type),
    device=str(accelerator.device),
    grad_dtype=str(accelerator.unwrap_model(model)[0].weight.grad.dtype),
)
