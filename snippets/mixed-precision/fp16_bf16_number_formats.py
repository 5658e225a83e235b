# fp16 versus bf16, measured with real casts and real arithmetic. Both are 16 bits; they split them
# differently: fp16 = 1 sign + 5 exponent + 10 mantissa bits, bf16 = 1 + 8 + 7 (float32 is 1 + 8 + 23).
#  * range:      fp16 tops out at 65504 and overflows to inf; bf16 has float32's exponent (up to ~3.4e38)
#  * tiny values: fp16 is subnormal below ~6.1e-5 and flushes to 0 below ~3e-8; bf16 keeps 1e-8
#  * precision:  bf16 keeps 8 significant bits, so 1 + 2**-8 rounds to 1 and a running sum stalls at 256
#  * fp8 (torch.float8_e4m3fn: 1 + 4 + 3 bits, largest 448): 1.05 rounds to 1.0, and gradient-sized
#    values (~1e-4) all round to 0 unless the tensor is first scaled so its largest value maps to 448
# Each claim computes the same thing in the other format (or in float32) as its control.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/mixed-precision/fp16_bf16_number_formats.py
import torch
from accelerate import Accelerator

import _claims

accelerator = Accelerator()  # the formats are the same on every rank; each rank checks them
fp16, bf16, fp32 = torch.float16, torch.bfloat16, torch.float32

# --- 1. Range: an activation of 300 squared (90,000) is past fp16's largest number, 65504.
x = torch.full((4,), 300.0)
square = {dt: (x.to(dt) * x.to(dt)) for dt in (fp16, bf16, fp32)}
_claims.equal(
    "fp16_overflows_past_65504",
    measured=bool(torch.isinf(square[fp16]).all()),
    control=bool(torch.isinf(square[bf16]).all()),  # control: the same product in bf16
    expected=True,
    fp16_max=torch.finfo(fp16).max,
    fp16_of_65504=torch.tensor(65504.0).to(fp16).item(),
    fp16_of_65520=str(torch.tensor(65520.0).to(fp16).item()),  # halfway to the next step: rounds up to inf
    bf16_300_squared=square[bf16][0].item(),
    fp32_300_squared=square[fp32][0].item(),
    bf16_max=torch.finfo(bf16).max,
    fp32_max=torch.finfo(fp32).max,
    bf16_of_fp32_max=str(torch.tensor(torch.finfo(fp32).max).to(bf16).item()),  # the top sliver rounds up to inf
)

# --- 2. A real forward pass: one Linear whose outputs exceed 65504, then LayerNorm and a loss.
torch.manual_seed(0)
layer, norm = torch.nn.Linear(64, 64), torch.nn.LayerNorm(64)
torch.nn.init.uniform_(layer.weight, 0.0, 1.0)  # positive weights: the 64 products add up
inputs = 3000 + torch.rand(8, 64)  # finite in fp16 (3000 < 65504); their weighted sums are ~96,000


def loss_under(dtype):
    with torch.autocast("cpu", dtype=dtype):  # Linear runs in `dtype`, the loss in float32
        hidden = layer(inputs)
        return torch.nn.functional.mse_loss(norm(hidden), torch.zeros(8, 64)), hidden


fp16_loss, fp16_hidden = loss_under(fp16)
bf16_loss, bf16_hidden = loss_under(bf16)
_claims.equal(
    "fp16_activation_overflow_makes_nan_loss",
    measured=bool(torch.isnan(fp16_loss)),
    control=bool(torch.isnan(bf16_loss)),  # control: the same forward under bf16 autocast
    expected=True,
    largest_fp32_activation=layer(inputs).abs().max().item(),
    fp16_inf_activations=int(torch.isinf(fp16_hidden).sum()),
    bf16_loss=bf16_loss.item(),
)

# --- 3. Tiny values: 1e-8 (a typical small gradient) and the subnormal range.
tiny = torch.tensor([1e-8, 1e-7])
in_fp16, in_bf16 = tiny.to(fp16).to(fp32), tiny.to(bf16).to(fp32)
_claims.equal(
    "fp16_flushes_1e_8_to_zero",
    measured=in_fp16[0].item(),
    control=in_bf16[0].item(),  # control: the same cast to bf16
    expected=0.0,
    fp16_smallest_normal=torch.finfo(fp16).tiny,
    fp16_smallest_subnormal=torch.tensor(1, dtype=torch.int16).view(fp16).item(),  # bit pattern 0x0001
    bf16_smallest_normal=torch.finfo(bf16).tiny,
    fp32_smallest_normal=torch.finfo(fp32).tiny,
)
relative_error = lambda cast: abs(cast[1].item() - 1e-7) / 1e-7  # noqa: E731
_claims.at_least(
    "fp16_subnormals_lose_precision",
    measured=relative_error(in_fp16),  # 1e-7 is subnormal in fp16: only a few bits remain
    control=relative_error(in_bf16),  # control: the same cast to bf16, still a normal number
    bound=0.05,
    fp16_of_1e_7=in_fp16[1].item(),
    bf16_of_1e_7=in_bf16[1].item(),
)

# --- 4. Precision: 8 significant bits (bf16) against 11 (fp16).
one, step = torch.tensor(1.0), torch.tensor(2.0**-8)
gap = {dt: ((one.to(dt) + step.to(dt)) - one.to(dt)).item() for dt in (fp16, bf16, fp32)}
_claims.equal(
    "bf16_rounds_1_plus_2_pow_minus_8_to_1",
    measured=gap[bf16],
    control=gap[fp16],  # control: the same sum in fp16
    expected=0.0,
    fp32=gap[fp32],
    eps_bf16=torch.finfo(bf16).eps,
    eps_fp16=torch.finfo(fp16).eps,
    eps_fp32=torch.finfo(fp32).eps,
)


def running_sum(dtype, n=1000):
    total = torch.zeros((), dtype=dtype)
    for _ in range(n):  # a 16-bit accumulator, as in a hand-written loss or metric sum
        total = total + torch.ones((), dtype=dtype)
    return total.item()


_claims.equal(
    "bf16_running_sum_stalls_at_256",
    measured=running_sum(bf16),
    control=running_sum(fp32),  # control: the same loop with a float32 accumulator
    expected=256.0,
    fp16=running_sum(fp16),  # 1000: fp16 stalls only at 2048
    bf16_matmul_of_1000_ones=(torch.ones(1, 1000, dtype=bf16) @ torch.ones(1000, 1, dtype=bf16)).item(),
)

# --- 5. Why the weights stay float32: the bf16 numbers next to 1.0 are 1 - 2**-8 and 1 + 2**-7, so
# 1.0 - 1e-3 (an SGD update of 1e-3) rounds back to 1.0 and a bf16 weight never moves.
w16, w32 = torch.ones((), dtype=bf16), torch.ones(())
for _ in range(10):
    w16 = w16 - torch.tensor(1e-3, dtype=bf16)
    w32 = w32 - 1e-3
_claims.equal(
    "bf16_weight_ignores_small_updates",
    measured=1.0 - w16.item(),
    control=1.0 - w32.item(),  # control: the same 10 updates on a float32 (master) weight
    expected=0.0,
)

# --- 6. fp8, as Transformer Engine and torchao use it for matmul inputs: E4M3 (1 + 4 + 3 bits, largest
# 448, eps 2**-3) and E5M2 (1 + 5 + 2, fp16's range). Only casts are used (no fp8 matmul on this CPU).
e4m3, e5m2 = torch.float8_e4m3fn, torch.float8_e5m2
value = torch.tensor(1.05)
cast_error = {dt: abs(value.to(dt).to(fp32).item() - 1.05) for dt in (e4m3, bf16)}
_claims.at_least(
    "fp8_e4m3_keeps_3_mantissa_bits",
    measured=cast_error[e4m3],  # 1.05 -> 1.0: its e4m3 neighbours are 1.0 and 1.125
    control=cast_error[bf16],  # control: the same cast to bf16 (1.046875)
    bound=0.01,
    e4m3_of_1_05=value.to(e4m3).to(fp32).item(),
    bf16_of_1_05=value.to(bf16).to(fp32).item(),
    eps_e4m3=torch.finfo(e4m3).eps,
    eps_e5m2=torch.finfo(e5m2).eps,
    e4m3_max=torch.finfo(e4m3).max,
    e5m2_max=torch.finfo(e5m2).max,
    e4m3_of_1000=torch.tensor(1000.0).to(e4m3).to(fp32).item(),  # past 448: torch's cast clips to 448
)

torch.manual_seed(0)
grads = torch.randn(1000) * 1e-4  # gradient-sized values, far below e4m3's smallest subnormal (2**-9)


def fp8_round_trip_error(tensor, dtype, per_tensor_scale):
    """Relative error of tensor -> fp8 -> float32, optionally scaled so that its amax maps to the format's max."""
    scale = torch.finfo(dtype).max / tensor.abs().max() if per_tensor_scale else torch.tensor(1.0)
    back = (tensor * scale).to(dtype).to(fp32) / scale
    return ((back - tensor).norm() / tensor.norm()).item()


_claims.at_most(
    "fp8_e4m3_needs_per_tensor_scaling",
    measured=fp8_round_trip_error(grads, e4m3, per_tensor_scale=True),
    control=fp8_round_trip_error(grads, e4m3, per_tensor_scale=False),  # control: cast as is
    tolerance=0.1,
    e4m3_zeros_unscaled=int((grads.to(e4m3).to(fp32) == 0).sum()),
    e5m2_error_unscaled=fp8_round_trip_error(grads, e5m2, per_tensor_scale=False),
    e5m2_error_scaled=fp8_round_trip_error(grads, e5m2, per_tensor_scale=True),
    bf16_error_unscaled=fp8_round_trip_error(grads, bf16, per_tensor_scale=False),
    e4m3_smallest_subnormal=torch.tensor(1, dtype=torch.uint8).view(e4m3).to(fp32).item(),
)
