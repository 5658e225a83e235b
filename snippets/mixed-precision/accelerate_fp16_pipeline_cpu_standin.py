# How Accelerate wires fp16 mixed precision, run on CPU. The fp16 branch of Accelerator.__init__ runs
# only on a non-CPU device; two lines below stand in for it: native_amp = True and a GradScaler
# (GradScaler("cpu") here; get_grad_scaler() gives GradScaler("cuda") on a GPU). Everything after is
# Accelerate's own code, unmodified, on top of torch's CPU autocast (float16) and CPU GradScaler:
#  * prepare_model: forward -> convert_outputs_to_fp32(torch.autocast(..., dtype=float16)(forward));
#  * accelerator.backward(loss): self.scaler.scale(loss).backward(), gradients 65536x too large;
#  * accelerator.clip_grad_norm_: unscale_gradients() first, so it measures (and clips) the true norm;
#  * a model that is itself .half() has float16 .grad, which GradScaler refuses to unscale
#    (optimizer.step() and clip_grad_norm_ both unscale).
# Controls: the original forward; accelerator.backward with no scaler on the Accelerator; torch's
# clip_grad_norm_ on the scaled gradients; a float32 model. (Ratios are taken against a plain
# loss.backward() of the same loss.)
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/mixed-precision/accelerate_fp16_pipeline_cpu_standin.py
import copy

import torch
from accelerate import Accelerator

import _claims

accelerator = Accelerator(mixed_precision="fp16")
accelerator.native_amp = True  # --- stand-in for the GPU branch of Accelerator.__init__ ...
accelerator.scaler = torch.amp.GradScaler("cpu")  # --- ... there: get_grad_scaler(), a GradScaler("cuda")

torch.manual_seed(0)
base = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
inputs = torch.randn(8, 16) + accelerator.process_index


def loss_of(model):
    return model(inputs).square().mean() * 1e-2  # small enough that 65536x fits in float16


def prepared(dtype=torch.float32):
    net = copy.deepcopy(base).to(dtype)
    return (net, *accelerator.prepare(net, torch.optim.SGD(net.parameters(), lr=0.1)))


def grads(net):
    return torch.cat([p.grad.flatten().float() for p in net.parameters()])


# --- 1. prepare() wraps forward in fp16 autocast and casts the outputs back to float32 ---
net, model, optimizer = prepared()
seen = []
net[0].register_forward_hook(lambda module, args, output: seen.append(str(output.dtype)))
out = model(inputs)
original = net._original_forward(inputs)  # control: the forward prepare() wrapped
_claims.equal(
    "prepare_wraps_forward_in_fp16_autocast",
    measured=[seen[0], str(out.dtype)],
    control=[seen[1], str(original.dtype)],
    expected=["torch.float16", "torch.float32"],
)

# --- 2. accelerator.backward scales the loss ---
accelerator.backward(loss_of(model))
scaled = grads(net)
optimizer.zero_grad()
loss_of(model).backward()  # control: plain backward, no scaler
plain = grads(net)
ratio = (scaled.norm() / plain.norm()).item()
saved_scaler, accelerator.scaler = accelerator.scaler, None
optimizer.zero_grad()
accelerator.backward(loss_of(model))  # control: the same call with no scaler on the Accelerator
ratio_without = (grads(net).norm() / plain.norm()).item()
accelerator.scaler = saved_scaler
_claims.between(
    "backward_multiplies_gradients_by_the_scale",
    measured=ratio,
    control=ratio_without,
    low=65536 * 0.999,
    high=65536 * 1.001,
    scale=accelerator.scaler.get_scale(),
)

# --- 3. clip_grad_norm_ unscales before measuring ---
optimizer.zero_grad()
accelerator.backward(loss_of(model))
scaled_norm = torch.nn.utils.clip_grad_norm_(net.parameters(), float("inf")).item()  # control: no unscale
norm = accelerator.clip_grad_norm_(model.parameters(), max_norm=1e9).item()  # unscale_gradients(), then clip
optimizer.step()  # scaler.step: already unscaled for this optimizer, so not unscaled twice
_claims.between(
    "clip_grad_norm_sees_the_true_norm",
    measured=norm / plain.norm().item(),
    control=scaled_norm / plain.norm().item(),
    low=0.999,
    high=1.001,
    true_norm=plain.norm().item(),
    norm_returned=norm,
    norm_of_scaled_grads=scaled_norm,
    step_was_skipped=optimizer.step_was_skipped,
)


# --- 4. A model cast to float16 by hand: its .grad is float16 and cannot be unscaled ---
def step_error(dtype):
    net, model, optimizer = prepared(dtype)
    accelerator.backward(model(inputs.to(dtype)).square().mean() * 1e-2)  # inputs in the model's dtype
    try:
        optimizer.step()  # scaler.step(optimizer) -> scaler.unscale_(optimizer)
        return f"no error, grad dtype {net[0].weight.grad.dtype}"
    except ValueError as error:
        return str(error)


_claims.equal(
    "half_model_cannot_be_unscaled",
    measured=step_error(torch.float16),
    control=step_error(torch.float32),  # control: the same model left in float32
    expected="Attempting to unscale FP16 gradients.",
)
