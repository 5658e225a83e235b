# GPU-ready (needs CUDA on a GPU of compute capability 8.9 or later, Ada or Hopper; skipped on CPU):
# an FP8 matmul on the tensor cores with per-tensor scales, torch._scaled_mm, the kernel FP8 recipes
# (torchao, Transformer Engine) build on. Inputs are amax-scaled into E4M3, multiplied in FP8 with
# the inverse scales, output in bf16. It must equal, to bf16 output rounding, the float32 matmul of the
# same dequantized FP8 inputs, and it must be far closer to the float32 matmul of the original inputs
# than the same FP8 kernel without the scales (inputs cast unscaled: small values flushed).
#
#   accelerate launch --multi_gpu --num_processes 2 snippets/mixed-precision/fp8_scaled_mm_cuda.py
import torch
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
device = accelerator.device
E4M3 = torch.float8_e4m3fn
generator = torch.Generator().manual_seed(0)
a = (torch.randn(256, 512, generator=generator) * 1e-3).to(device)  # small, as activations and weights often are
b = (torch.randn(512, 256, generator=generator) * 1e-3).to(device)


def to_fp8(x):
    scale = torch.finfo(E4M3).max / x.abs().max()
    return (x * scale).to(E4M3), (1.0 / scale).float()


def scaled_mm(a8, inverse_a, b8, inverse_b):
    # _scaled_mm wants the second operand column-major
    return torch._scaled_mm(a8, b8.t().contiguous().t(), scale_a=inverse_a, scale_b=inverse_b, out_dtype=torch.bfloat16)


a8, inverse_a = to_fp8(a)
b8, inverse_b = to_fp8(b)
one = torch.tensor(1.0, device=device)
fp8_result = scaled_mm(a8, inverse_a, b8, inverse_b).float()
dequantized = (a8.float() * inverse_a) @ (b8.float() * inverse_b)
reference = a @ b
unscaled = scaled_mm(a.to(E4M3), one, b.to(E4M3), one).float()
relative = lambda x, y: (x - y).abs().max().item() / y.abs().mean().item()
_claims.at_most(
    "scaled_mm_is_the_dequantized_matmul",
    measured=relative(fp8_result, dequantized),
    control=relative(unscaled, dequantized),
    tolerance=0.02,
    capability=".".join(map(str, torch.cuda.get_device_capability(device))),
    device=torch.cuda.get_device_name(device),
)
_claims.at_most(
    "per_tensor_scales_keep_the_fp8_matmul_close",
    measured=relative(fp8_result, reference),
    control=relative(unscaled, reference),
    tolerance=0.5,
    relative_error_scaled=relative(fp8_result, reference),
    relative_error_unscaled=relative(unscaled, reference),
)
