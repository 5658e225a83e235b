# GPU-ready (needs CUDA on an Ampere-or-later GPU; skipped on CPU): the same float32 matmul with
# TF32 allowed and not. With TF32 the result differs, its error against float64 is far larger, and it
# agrees with the CPU emulation of TF32 (inputs rounded to 10 mantissa bits, then a full-float32
# matmul) much better than the full-float32 result does. Controls: TF32 off for the first two claims;
# the full-float32 result for the third.
#
#   accelerate launch --multi_gpu --num_processes 2 snippets/mixed-precision/tf32_matmul_cuda.py
import torch
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
device = accelerator.device
generator = torch.Generator().manual_seed(0)
a = torch.randn(1024, 4096, generator=generator).to(device)
b = torch.randn(4096, 1024, generator=generator).to(device)
exact = a.double() @ b.double()
scale = exact.abs().mean().item()


def round_to_tf32(x):  # round to nearest, ties to even, at 10 explicit mantissa bits
    pattern = x.contiguous().view(torch.int32)
    pattern = pattern + ((1 << 12) - 1) + ((pattern >> 13) & 1)
    return (pattern & ~((1 << 13) - 1)).view(torch.float32)


def matmul(allow_tf32, x=a, y=b):
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    try:
        return x @ y
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


with_tf32, without_tf32 = matmul(True), matmul(False)
emulated = matmul(False, round_to_tf32(a), round_to_tf32(b))
relative = lambda result, reference: (result.double() - reference.double()).abs().max().item() / scale
# The control: float32 inputs without TF32, accumulated in another order (four 1024-long partial products
# summed), a measured ratio near 1 rather than 1 by construction.
reordered = sum(matmul(False, a[:, k : k + 1024], b[k : k + 1024]) for k in range(0, 4096, 1024))
_claims.at_least(
    "cuda_tf32_error_is_30x_fp32",
    measured=relative(with_tf32, exact) / relative(without_tf32, exact),
    control=relative(reordered, exact) / relative(without_tf32, exact),
    bound=30.0,
    relative_error_tf32=relative(with_tf32, exact),
    relative_error_fp32=relative(without_tf32, exact),
    device=torch.cuda.get_device_name(device),
    capability=".".join(map(str, torch.cuda.get_device_capability(device))),
)
_claims.at_least(
    "cuda_allow_tf32_changes_the_result",
    measured=relative(with_tf32, without_tf32),
    control=relative(matmul(False), without_tf32),
    bound=1e-5,
)
_claims.at_most(
    "cuda_tf32_matches_the_emulation",
    measured=relative(with_tf32, emulated) / relative(with_tf32, exact),
    control=relative(without_tf32, emulated) / relative(with_tf32, exact),
    tolerance=0.25,
    relative_difference_from_emulation=relative(with_tf32, emulated),
)
