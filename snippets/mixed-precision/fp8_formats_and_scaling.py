# FP8 training in numbers, with torch's own float8 dtypes (casts work on a CPU; FP8 matmuls need a
# GPU). E4M3 (torch.float8_e4m3fn: 4 exponent, 3 mantissa bits, no infinities) for weights and
# activations, E5M2 (torch.float8_e5m2: 5 exponent, 2 mantissa bits) for gradients. Each claim casts
# a tensor to FP8 and back and compares with the original:
#  * the largest finite values (control: the same ramp without the cast)
#  * what happens past them: E4M3 saturates at 448 in torch 2.13, E5M2 overflows to inf
#  * per-tensor amax scaling (scale = FP8 max / amax, cast, divide back) against the same cast
#    without the scale: outliers clipped, small gradients flushed to zero
#  * precision: E5M2's round-trip error is twice E4M3's (one mantissa bit fewer); control: a format
#    with E4M3's 3 mantissa bits and another exponent bias (float8_e4m3fnuz), about 1
#  * Accelerate's MS-AMP recipe defaults to opt_level "O2" (read with the argument omitted)
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/mixed-precision/fp8_formats_and_scaling.py
import torch
from accelerate import Accelerator
from accelerate.utils import MSAMPRecipeKwargs

import _claims

accelerator = Accelerator()  # the formats are the same on every rank; each rank checks them
E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def round_trip(x, dtype, scale=1.0):
    return (x * scale).to(dtype).to(torch.float32) / scale


def amax_scale(x, dtype):
    """Per-tensor scaling as FP8 recipes do it: map the tensor's largest magnitude to the format's max."""
    return torch.finfo(dtype).max / x.abs().max().item()


ramp = torch.linspace(0, 70000, 700001)


def largest_finite(dtype):
    through = round_trip(ramp, dtype)
    return through[torch.isfinite(through)].max().item()


largest = [largest_finite(dtype) for dtype in (E4M3, E5M2)]
_claims.equal(
    "fp8_largest_finite_values",
    measured=largest,
    control=[ramp.max().item()] * 2,
    expected=[448.0, 57344.0],
    e4m3_smallest_normal=torch.finfo(E4M3).smallest_normal,
    e5m2_smallest_normal=torch.finfo(E5M2).smallest_normal,
    e4m3_of_2_pow_minus_9=round_trip(torch.tensor([2.0**-9]), E4M3).item(),  # its smallest subnormal
    e5m2_of_2_pow_minus_16=round_trip(torch.tensor([2.0**-16]), E5M2).item(),
)

through = lambda value, dtype: str(round_trip(torch.tensor([value]), dtype).item())
# E5M2 rounds to nearest: up to half a step (4096) past 57,344 still rounds down to it; 61,440 is the midpoint
past_the_max = [through(1000.0, E4M3), through(float("inf"), E4M3), through(61439.0, E5M2), through(61440.0, E5M2), through(1e5, E5M2)]
in_range = [through(400.0, E4M3), through(300.0, E4M3), through(5e4, E5M2), through(4e4, E5M2), through(3e4, E5M2)]
_claims.equal(
    "e4m3_saturates_e5m2_overflows",
    measured=past_the_max,
    control=in_range,
    expected=["448.0", "448.0", "57344.0", "inf", "inf"],
)

generator = torch.Generator().manual_seed(0)
activations = torch.randn(65536, generator=generator) * 200  # |x| up to ~900: past E4M3's 448
normal = activations.abs() >= activations.abs().max() / 2**6  # stays in E4M3's normal range after scaling


def worst_relative_error(x, dtype, scale, where):
    return ((round_trip(x, dtype, scale) - x).abs() / x.abs())[where].max().item()


_claims.at_most(
    "amax_scaling_keeps_outliers",
    measured=worst_relative_error(activations, E4M3, amax_scale(activations, E4M3), normal),
    control=worst_relative_error(activations, E4M3, 1.0, normal),
    tolerance=2**-4,
    amax=activations.abs().max().item(),
    clipped_without_scale=int((activations.abs() > 448).sum()),
    scale=amax_scale(activations, E4M3),
)

gradients = torch.randn(65536, generator=generator) * 1e-6
flushed = lambda scale: (round_trip(gradients, E5M2, scale) == 0).float().mean().item()
_claims.at_most(
    "amax_scaling_keeps_small_gradients",
    measured=flushed(amax_scale(gradients, E5M2)),
    control=flushed(1.0),
    tolerance=0.01,
    gradient_amax=gradients.abs().max().item(),
    scale=amax_scale(gradients, E5M2),
)

worst_scaled_error = lambda dtype: worst_relative_error(activations, dtype, amax_scale(activations, dtype), normal)
e4m3_error, e5m2_error = worst_scaled_error(E4M3), worst_scaled_error(E5M2)
# The control keeps the 3 mantissa bits and changes only the exponent encoding: float8_e4m3fnuz (bias 8,
# max 240) against float8_e4m3fn. Its ratio is measured, not 1 by construction, and stays near 1 because
# the precision lost in a round trip is set by the mantissa.
same_mantissa_error = worst_scaled_error(torch.float8_e4m3fnuz)
_claims.between(
    "e5m2_has_half_the_precision_of_e4m3",
    measured=e5m2_error / e4m3_error,
    control=same_mantissa_error / e4m3_error,
    low=1.8,
    high=2.2,
    e4m3_worst_relative_error=e4m3_error,
    e5m2_worst_relative_error=e5m2_error,
    e4m3fnuz_worst_relative_error=same_mantissa_error,
)

# An FP8 matmul multiplies the FP8 values and applies the inverse scales to the float32 accumulator,
# which equals the float32 matmul of the dequantized inputs (emulated here; the GPU-ready proof runs it).
a = torch.randn(256, 512, generator=generator) * 1e-3  # small, as weights and activations often are
b = torch.randn(512, 256, generator=generator) * 1e-3
exact = a @ b
relative = lambda product: (product - exact).abs().max().item() / exact.abs().mean().item()
scaled_product = round_trip(a, E4M3, amax_scale(a, E4M3)) @ round_trip(b, E4M3, amax_scale(b, E4M3))
unscaled_product = round_trip(a, E4M3) @ round_trip(b, E4M3)
_claims.at_most(
    "scaled_fp8_matmul_stays_close",
    measured=relative(scaled_product),
    control=relative(unscaled_product),
    tolerance=0.5,
    inputs_flushed_to_zero_unscaled=(round_trip(a, E4M3) == 0).float().mean().item(),
)

_claims.equal(
    "msamp_recipe_defaults_to_o2",
    measured=MSAMPRecipeKwargs().opt_level,
    control=MSAMPRecipeKwargs(opt_level="O1").opt_level,
    expected="O2",
)
