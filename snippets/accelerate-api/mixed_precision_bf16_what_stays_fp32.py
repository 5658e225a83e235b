# What mixed precision really makes half-size. With Accelerator(mixed_precision="bf16") the
# parameters, their gradients and the Adam state stay float32; only the computation inside
# forward runs in bfloat16 (torch.autocast), so the activations take half the bytes; the model's
# output is cast back to float32 (convert_outputs_to_fp32); bf16 needs no GradScaler.
# The backward is not full precision either: the gradients flowing back through those activations
# are bfloat16 (backward ops run in the dtype autocast chose for the forward); only the float32
# parameters' .grad is accumulated in float32.
# Negative controls: a model cast to bfloat16 (what "half-precision training" would mean), given the
# same Adam step, keeps its weights, gradients and Adam state at half the bytes; the same model called without accelerate's wrapper (what mixed_precision="no"
# runs) keeps float32 activations and float32 gradients in backward; its raw bf16 output, before
# the cast back, is bfloat16.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/accelerate-api/mixed_precision_bf16_what_stays_fp32.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs; bf16 autocast runs on CPU too)
import copy

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed

import _claims

accelerator = Accelerator(mixed_precision="bf16")
set_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8)
).to(accelerator.device)
plain = copy.deepcopy(model)  # same weights, never prepared: no autocast around its forward
inputs = torch.randn(32, 64, device=accelerator.device)
targets = torch.randn(32, 8, device=accelerator.device)

activations = []  # (dtype, bytes) of every layer output computed inside forward
backward_dtypes = []  # dtype of the gradient that flows back into each of those outputs in backward


def record(module, args, output):
    activations.append((str(output.dtype), output.numel() * output.element_size()))
    if output.requires_grad:  # autograd calls the hook with d(loss)/d(output) during backward
        output.register_hook(lambda grad: backward_dtypes.append(str(grad.dtype)))


for layer in list(model) + list(plain):
    layer.register_forward_hook(record)

optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
model, optimizer = accelerator.prepare(model, optimizer)

# One real training step under bf16.
activations.clear()
output = model(inputs)
bf16_activations = list(activations)
loss = torch.nn.functional.mse_loss(output, targets)
backward_dtypes.clear()
accelerator.backward(loss)  # outside autocast, as it should be
bf16_backward, bf16_gradients_seen = sorted(set(backward_dtypes)), len(backward_dtypes)
optimizer.step()


def nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


inner = accelerator.unwrap_model(model)
params = list(inner.parameters())
state = [v for s in optimizer.state_dict()["state"].values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0]
n_params = sum(p.numel() for p in params)
# param + grad + Adam exp_avg + exp_avg_sq, all float32: 16 bytes per parameter
kept_bytes = nbytes(params) + nbytes(p.grad for p in params) + nbytes(state)
# Control: the recipe removed. The same model cast to bfloat16 gets the same Adam step; its parameters,
# gradients and Adam moments are then bfloat16 (Adam's state follows the parameter dtype).
half_model = copy.deepcopy(plain).to(torch.bfloat16)  # the copy keeps the forward hooks: lists cleared below
half_optimizer = torch.optim.Adam(half_model.parameters(), lr=1e-3)
torch.nn.functional.mse_loss(half_model(inputs.to(torch.bfloat16)).float(), targets).backward()
half_optimizer.step()
half_params = list(half_model.parameters())
half_state = [v for s in half_optimizer.state_dict()["state"].values() for v in s.values()
              if torch.is_tensor(v) and v.dim() > 0]
half_bytes = nbytes(half_params) + nbytes(p.grad for p in half_params) + nbytes(half_state)
_claims.equal(
    "weights_grads_adam_state_stay_fp32",
    measured=kept_bytes,
    control=half_bytes,
    expected=16 * n_params,
    parameters=n_params,
    dtypes=sorted({str(t.dtype) for t in params + [p.grad for p in params] + state}),
    scaler=repr(accelerator.scaler),  # None: bf16 has float32's exponent range, no loss scaling needed
    control_dtypes=sorted({str(t.dtype) for t in half_params + [p.grad for p in half_params] + half_state}),
)

# Activations and backward: the same forward and backward without accelerate's autocast wrapper.
activations.clear()
backward_dtypes.clear()
torch.nn.functional.mse_loss(plain(inputs), targets).backward()
fp32_activations = list(activations)
fp32_backward = sorted(set(backward_dtypes))
activations_bytes = sum(b for _, b in bf16_activations)
plain_bytes = sum(b for _, b in fp32_activations)
elements = plain_bytes / 4  # same layers, same shapes: float32 is 4 bytes per element
_claims.between(
    "activations_inside_forward_are_bf16",
    measured=activations_bytes / elements,  # bytes per activation element
    control=plain_bytes / elements,
    low=1.5,
    high=2.5,
    bf16_activation_dtypes=sorted({d for d, _ in bf16_activations}),
    plain_activation_dtypes=sorted({d for d, _ in fp32_activations}),
    bf16_activation_bytes=activations_bytes,
    fp32_activation_bytes=plain_bytes,
    saved_ratio=1 - activations_bytes / plain_bytes,
)

# Backward: autocast is not "forward only". Backward ops run in the dtype autocast chose for the
# matching forward ops (torch/amp/autocast_mode.py), so the gradients flowing back through the layer
# outputs are bfloat16 too; only the float32 parameters' .grad is accumulated in float32.
_claims.equal(
    "backward_through_activations_is_bf16",
    measured=bf16_backward,
    control=fp32_backward,
    expected=["torch.bfloat16"],
    layer_output_gradients_seen=bf16_gradients_seen,
    parameter_grad_dtypes=sorted({str(p.grad.dtype) for p in params}),
)

# Output: accelerate wraps forward as convert_outputs_to_fp32(autocast(forward)). Inside only the
# autocast part (the same autocast accelerator.autocast() enters) the output is still bf16.
with accelerator.autocast(), torch.no_grad():
    raw = plain(inputs)
_claims.equal(
    "model_output_cast_back_to_fp32",
    measured=str(output.dtype),
    control=str(raw.dtype),
    expected="torch.float32",
    loss_dtype=str(loss.dtype),
)
