# TF32: what it is, whether PyTorch turns it on, and what it costs in accuracy.
# TF32 keeps float32's 8 exponent bits and 10 of its 23 mantissa bits; Ampere and later tensor cores
# round matmul inputs to it and accumulate in float32. There are no TF32 tensor cores on a CPU, so the
# format is emulated here bit for bit: round a float32's mantissa to k bits (round to nearest, ties to
# even) by integer arithmetic on its bit pattern. The emulation is first checked against torch's own
# bfloat16 cast (k = 7), then used at k = 10.
#  * defaults, read with nothing set: float32 matmul precision "highest", matmul allow_tf32 False,
#    cuDNN (convolutions) allow_tf32 True, bf16 GEMMs' reduced-precision reduction allowed (True).
#    Controls: the same reads after setting them.
#  * accuracy of a 256x1024 @ 1024x256 matmul against float64: TF32-rounded inputs against float32
#    ones, and bf16-rounded against TF32-rounded; x @ I with TF32 inputs changes x.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/mixed-precision/tf32_matmul_precision.py
import torch
from accelerate import Accelerator

import _claims

# Read before anything sets them (Accelerator() does not touch them): these are the defaults.
default_precision = torch.get_float32_matmul_precision()
default_matmul_tf32 = torch.backends.cuda.matmul.allow_tf32
default_cudnn_tf32 = torch.backends.cudnn.allow_tf32
default_bf16_reduction = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction

accelerator = Accelerator()  # every rank checks the same arithmetic

torch.set_float32_matmul_precision("high")  # the control: what turning TF32 on for matmuls looks like
set_precision, set_matmul_tf32 = torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32
torch.set_float32_matmul_precision(default_precision)
_claims.equal(
    "matmul_tf32_is_off_by_default",
    measured=f"{default_precision}/allow_tf32={default_matmul_tf32}",
    control=f"{set_precision}/allow_tf32={set_matmul_tf32}",
    expected="highest/allow_tf32=False",
    torch_version=torch.__version__,
)

torch.backends.cudnn.allow_tf32 = False  # the control: convolutions with TF32 turned off
cudnn_after_setting = torch.backends.cudnn.allow_tf32
torch.backends.cudnn.allow_tf32 = default_cudnn_tf32
_claims.equal(
    "cudnn_tf32_is_on_by_default",
    measured=default_cudnn_tf32,
    control=cudnn_after_setting,
    expected=True,
)

torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False  # the control: full-precision bf16 sums
bf16_reduction_after_setting = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = default_bf16_reduction
_claims.equal(
    "bf16_reduced_precision_reduction_is_on_by_default",
    measured=default_bf16_reduction,
    control=bf16_reduction_after_setting,
    expected=True,
)


def round_mantissa(x, bits, nearest=True):
    """float32 -> the nearest float32 with `bits` explicit mantissa bits (ties to even), as a float32."""
    dropped = 23 - bits
    pattern = x.contiguous().view(torch.int32)
    if nearest:
        lowest_kept = (pattern >> dropped) & 1
        pattern = pattern + ((1 << (dropped - 1)) - 1) + lowest_kept
    return (pattern & ~((1 << dropped) - 1)).view(torch.float32)


generator = torch.Generator().manual_seed(0)
samples = torch.randn(2**20, generator=generator) * torch.exp2(torch.randint(-60, 60, (2**20,), generator=generator))
torch_bf16 = samples.to(torch.bfloat16).to(torch.float32).view(torch.int32)
mismatches = int((round_mantissa(samples, 7).view(torch.int32) != torch_bf16).sum())
truncation_mismatches = int((round_mantissa(samples, 7, nearest=False).view(torch.int32) != torch_bf16).sum())
_claims.equal(
    "mantissa_rounding_matches_torch_bf16_cast",
    measured=mismatches,
    control=truncation_mismatches,
    expected=0,
    samples=samples.numel(),
)

tf32, bf16 = (lambda x: round_mantissa(x, 10)), (lambda x: round_mantissa(x, 7))
x = torch.randn(256, 1024, generator=generator)
identity = torch.eye(1024)
# x @ I is exact in float64, so the difference from x is the rounding of the inputs alone
through_tf32 = (tf32(x).double() @ tf32(identity).double()).float()
through_fp32 = (x.double() @ identity.double()).float()
relative_change = lambda y: ((y - x).abs() / x.abs()).max().item()
_claims.between(
    "tf32_identity_matmul_changes_the_input",
    measured=relative_change(through_tf32),
    control=relative_change(through_fp32),
    low=2**-13,
    high=2**-11,
    half_ulp_of_10_bits=2**-11,
)

a = torch.randn(256, 1024, generator=generator)
b = torch.randn(1024, 256, generator=generator)
exact = a.double() @ b.double()
scale = exact.abs().mean().item()


def relative_error(round_inputs):
    """max |error| / mean |result| of a float32-accumulated matmul of rounded inputs, against float64."""
    return ((round_inputs(a) @ round_inputs(b)).double() - exact).abs().max().item() / scale


error = {"fp32": relative_error(lambda t: t), "tf32": relative_error(tf32), "bf16": relative_error(bf16)}
# The control keeps float32 inputs and changes only the order of accumulation (four 256-long partial
# products summed), as another kernel would: a measured ratio, not 1 by construction, which shows that
# accumulation order alone moves the error by far less than the input rounding does.
reordered = sum(a[:, k : k + 256] @ b[k : k + 256] for k in range(0, 1024, 256))
error["fp32_reordered"] = (reordered.double() - exact).abs().max().item() / scale
_claims.at_least(
    "tf32_inputs_cost_two_orders_of_magnitude",
    measured=error["tf32"] / error["fp32"],
    control=error["fp32_reordered"] / error["fp32"],
    bound=30.0,
    relative_error_fp32=error["fp32"],
    relative_error_fp32_reordered=error["fp32_reordered"],
    relative_error_tf32=error["tf32"],
    relative_error_bf16=error["bf16"],
)
_claims.between(
    "bf16_inputs_cost_8x_tf32",
    measured=error["bf16"] / error["tf32"],
    control=error["fp32"] / error["tf32"],
    low=4.0,
    high=16.0,
)
