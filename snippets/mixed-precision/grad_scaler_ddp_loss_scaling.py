# Dynamic loss scaling with torch.amp.GradScaler under DDP, the plain-PyTorch recipe that
# Accelerate runs for mixed_precision="fp16" on a GPU (here on CPU: torch.autocast("cpu", float16)
# and GradScaler("cpu"), 2 ranks, gloo):
#   1. a tiny loss: its gradients underflow to 0 in fp16 unless the loss is scaled up first;
#   2. an overflow (inf in ONE rank's batch): DDP's all-reduce spreads the inf, the scaler finds it on
#      both ranks, skips optimizer.step() (weights unchanged) and halves the scale;
#   3. growth: after growth_interval clean steps the scale doubles;
#   4. a loss left in fp16 (out.square().mean() of an fp16 output): the scaled backward overflows at the
#      initial scale 65536 (not at 32768, which is under fp16's largest 65504).
# Controls: no scaler; optimizer.step() without the scaler's inf check; no_sync (no all-reduce);
# the default growth_interval; the same loss computed in float32; for the fp16 loss at 32768, the same
# loss at the initial 65536.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/mixed-precision/grad_scaler_ddp_loss_scaling.py
import copy

import torch
from accelerate import Accelerator

import _claims

TINY = 1e-7  # d(loss)/d(output) = 2 * output * 1e-7 / 16, a few 1e-9 per element: 0 in fp16 (subnormals end at 6e-8)

accelerator = Accelerator()  # mixed_precision="no": the autocast and the scaler below are written by hand
rank = accelerator.process_index
torch.manual_seed(0)
base = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 1))
torch.manual_seed(1 + rank)  # each rank its own batch, as a sharded DataLoader gives
inputs = torch.randn(16, 64)


def fresh():
    """A DDP replica of the same base model and its optimizer."""
    model = copy.deepcopy(base)
    return accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))


def forward_loss(model, batch, fp32_loss=True, scale=1.0):
    with torch.autocast("cpu", dtype=torch.float16):  # Linear layers run in float16
        out = model(batch)
    loss = out.float().square().mean() if fp32_loss else out.square().mean()  # float16 in, float16 out
    return loss * scale


def first_layer(model):
    return accelerator.unwrap_model(model)[0].weight


# --- 1. A tiny loss, backward with and without scaling (gradients all-reduced by DDP) ---
model, _ = fresh()
forward_loss(model, inputs, scale=TINY).backward()  # control: no GradScaler
unscaled_zero = (first_layer(model).grad == 0).float().mean().item()
model.zero_grad()
scaler = torch.amp.GradScaler("cpu")  # init_scale=2**16, growth_factor=2, backoff_factor=0.5, growth_interval=2000
scaler.scale(forward_loss(model, inputs, scale=TINY)).backward()  # --- the loss times 65536
scaled_zero = (first_layer(model).grad == 0).float().mean().item()
zero_rows = (first_layer(model).grad == 0).nonzero()[:, 0].unique().tolist()  # hidden units whose gradients still vanish
outgoing = accelerator.unwrap_model(model)[1].weight.detach().abs()[0]  # each hidden unit's weight to the output
with torch.autocast("cpu", dtype=torch.float16):
    tiny_out = accelerator.unwrap_model(model)(inputs).float()  # the output forward_loss saw (outside DDP)
tiny_loss = tiny_out.square().mean() * TINY
output_grad = torch.autograd.grad(tiny_loss, tiny_out)[0].abs()  # the float32 gradient before backward casts it to fp16
_claims.at_most(
    "scaler_keeps_tiny_gradients",
    measured=scaled_zero,
    control=unscaled_zero,
    tolerance=0.05,
    scale=scaler.get_scale(),
    grad_dtype=str(first_layer(model).grad.dtype),
    rows_with_zero_gradients_when_scaled=zero_rows,
    row_with_smallest_outgoing_weight=int(outgoing.argmin()),
    smallest_outgoing_weight=outgoing.min().item(),
    tiny_loss=tiny_loss.item(),
    output_gradient_mean_and_max=[output_grad.mean().item(), output_grad.max().item()],
)

# --- 2. An overflow in rank 1's batch only: one input of 70000 is inf once autocast casts it ---
bad = inputs.clone()
if rank == 1:
    bad[0, 0] = 70000.0  # > 65504


def overflow_step(use_scaler=True, sync=True):
    model, optimizer = fresh()
    before = first_layer(model).detach().clone()
    scaler = torch.amp.GradScaler("cpu")
    with accelerator.no_sync(model) if not sync else torch.enable_grad():
        loss = forward_loss(model, bad)
        if use_scaler:
            scaler.scale(loss).backward()
        else:
            loss.backward()
    own_grad_finite = bool(torch.isfinite(first_layer(model).grad).all())
    if use_scaler:
        scaler.step(optimizer)  # unscales, checks for inf/NaN; calls optimizer.step() only if none
        scaler.update()  # halves the scale after an overflow
    else:
        optimizer.step()  # control: no inf check
    after = first_layer(model).detach()
    changed = int((after != before).sum())  # NaN != anything, so NaN weights count as changed
    return changed, scaler.get_scale(), after, own_grad_finite


changed, scale_after, weights, _ = overflow_step()
changed_plain, _, _, _ = overflow_step(use_scaler=False)
_claims.equal(
    "overflow_step_is_skipped",
    measured=changed,
    control=changed_plain,
    expected=0,
    weights=first_layer(base).numel(),
)
both = accelerator.gather(weights[None])  # the first-layer weights of rank 0 and rank 1
_, scale_no_sync, weights_no_sync, rank_grad_finite = overflow_step(sync=False)
both_no_sync = accelerator.gather(weights_no_sync[None])
_claims.at_most(
    "inf_on_one_rank_skips_the_step_on_both",
    measured=(both[0] - both[1]).abs().max().item(),
    control=(both_no_sync[0] - both_no_sync[1]).abs().max().item(),
    tolerance=0.0,
    own_gradient_finite_without_allreduce=rank_grad_finite,
    scale_after_without_allreduce=scale_no_sync,
)
model, optimizer = fresh()
clean_scaler = torch.amp.GradScaler("cpu")
clean_scaler.scale(forward_loss(model, inputs)).backward()
clean_scaler.step(optimizer)
clean_scaler.update()
# Aside: a plain .mean() loss puts d(loss)/d(bias) = 1 on the last bias; times 65536 that is inf in fp16.
model, optimizer = fresh()
mean_scaler = torch.amp.GradScaler("cpu")
with torch.autocast("cpu", dtype=torch.float16):
    mean_loss = model(inputs).float().mean()
mean_scaler.scale(mean_loss).backward()
mean_scaler.step(optimizer)
mean_scaler.update()
_claims.equal(
    "overflow_halves_the_scale",
    measured=scale_after,
    control=clean_scaler.get_scale(),  # control: the same step on a clean batch
    expected=32768.0,
    scale_after_first_step_of_a_mean_loss=mean_scaler.get_scale(),
)


# --- 3. Growth: the scale doubles after growth_interval consecutive clean steps ---
def scale_trace(growth_interval, batches):
    model, optimizer = fresh()
    scaler = torch.amp.GradScaler("cpu", growth_interval=growth_interval)
    trace = []
    for batch in batches:
        optimizer.zero_grad()
        scaler.scale(forward_loss(model, batch)).backward()
        scaler.step(optimizer)
        scaler.update()
        trace.append(scaler.get_scale())
    return trace


grown = scale_trace(3, [inputs] * 3)
_claims.equal(
    "scale_doubles_after_growth_interval",
    measured=grown[-1],
    control=scale_trace(2000, [inputs] * 3)[-1],  # control: the default growth_interval, not reached
    expected=131072.0,
    trace_interval_3_with_overflow_at_step_4=scale_trace(3, [inputs] * 3 + [bad] + [inputs] * 3),
)

# --- 4. The loss left in float16: square() and mean() are on no CPU autocast list, so they stay float16 ---
model, _ = fresh()
fp16_loss = forward_loss(model, inputs, fp32_loss=False)
torch.amp.GradScaler("cpu").scale(fp16_loss).backward()
nonfinite_fp16 = (~torch.isfinite(first_layer(model).grad)).float().mean().item()
model.zero_grad()
torch.amp.GradScaler("cpu", init_scale=2.0**15).scale(forward_loss(model, inputs, fp32_loss=False)).backward()
nonfinite_at_half_scale = (~torch.isfinite(first_layer(model).grad)).float().mean().item()  # 32768 fits
model.zero_grad()
fp32_loss = forward_loss(model, inputs)
torch.amp.GradScaler("cpu").scale(fp32_loss).backward()
nonfinite_fp32 = (~torch.isfinite(first_layer(model).grad)).float().mean().item()
_claims.at_least(
    "fp16_loss_overflows_when_scaled",
    measured=nonfinite_fp16,
    control=nonfinite_fp32,  # control: the same loss computed in float32
    bound=0.99,
    loss_dtypes=[str(fp16_loss.dtype), str(fp32_loss.dtype)],
    fp16_loss_value=fp16_loss.item(),  # finite: only its gradients overflow
    fp16_of_65536=str(torch.tensor(65536.0).half().item()),
    nonfinite_fp16_loss_at_scale_32768=nonfinite_at_half_scale,
)
_claims.at_most(
    "fp16_loss_fits_at_32768",
    measured=nonfinite_at_half_scale,  # the same fp16 loss, scaled by 32768 (under fp16's largest, 65504)
    control=nonfinite_fp16,  # scaled by the initial 65536: inf in fp16
    tolerance=0.0,
)
