# What torch.autocast really casts, per op, and what stays float32 (CPU autocast, bfloat16, 2 ranks):
#  * matmul-type ops (linear, matmul, bmm, conv1d) run in bfloat16, whatever their input dtype;
#  * losses (mse_loss, cross_entropy, nll_loss, binary_cross_entropy_with_logits) run in float32;
#  * softmax, log_softmax, sum, layer_norm are on neither CPU list: they run in the dtype they get
#    (on CUDA they are on the float32 list);
#  * backward: the gradient flowing through a layer has the dtype autocast chose for its forward,
#    while parameters and their .grad stay float32 (the DDP all-reduce runs on float32 gradients).
# Controls: the same calls outside autocast; the same ops fed float32 instead of bfloat16; a model
# really cast to bfloat16.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/mixed-precision/autocast_op_dtypes.py
import copy

import torch
import torch.nn.functional as F
from accelerate import Accelerator

import _claims

accelerator = Accelerator()  # plain DDP; autocast is entered by hand below
bf16, fp32 = torch.bfloat16, torch.float32
torch.manual_seed(0)
x, w, target = torch.randn(8, 16), torch.randn(16, 16), torch.randint(0, 16, (8,))


def autocast(enabled=True):
    return torch.autocast("cpu", dtype=bf16, enabled=enabled)


# --- 1. matmul-type ops: float32 inputs come out bfloat16 ---
matmul_ops = {
    "linear": lambda: F.linear(x, w),
    "matmul": lambda: x @ w,
    "bmm": lambda: torch.bmm(x[None], w[None]),
    "conv1d": lambda: F.conv1d(x.T[None], w[:, :, None]),
}


def dtypes(ops, enabled=True):
    with autocast(enabled):
        return {name: str(op().dtype) for name, op in ops.items()}


inside, outside = dtypes(matmul_ops), dtypes(matmul_ops, enabled=False)
_claims.equal(
    "matmul_ops_run_in_bf16",
    measured=sum(d == "torch.bfloat16" for d in inside.values()),
    control=sum(d == "torch.bfloat16" for d in outside.values()),  # control: no autocast
    expected=len(matmul_ops),
    inside=inside,
    outside=outside,
)

# --- 2. losses: bfloat16 inputs come out float32 ---
logits = (x @ w).to(bf16)  # what a bf16 Linear hands to the loss
loss_ops = {
    "mse_loss": lambda: F.mse_loss(logits, torch.zeros_like(logits)),
    "cross_entropy": lambda: F.cross_entropy(logits, target),
    "nll_loss": lambda: F.nll_loss(logits, target),
    "binary_cross_entropy_with_logits": lambda: F.binary_cross_entropy_with_logits(logits, torch.rand_like(logits)),
}
inside, outside = dtypes(loss_ops), dtypes(loss_ops, enabled=False)
_claims.equal(
    "losses_run_in_fp32",
    measured=sum(d == "torch.float32" for d in inside.values()),
    control=sum(d == "torch.float32" for d in outside.values()),  # control: the same bf16 inputs, no autocast
    expected=len(loss_ops),
    inside=inside,
    outside=outside,
)


# --- 3. softmax & co. on CPU: neither lowered nor promoted; they follow their input ---
def passthrough_ops(t):
    return {
        "softmax": lambda: F.softmax(t, dim=-1),
        "log_softmax": lambda: F.log_softmax(t, dim=-1),
        "sum": lambda: t.sum(),
        "mean": lambda: t.mean(),
        "layer_norm": lambda: F.layer_norm(t, (16,)),
    }


fed_bf16 = dtypes(passthrough_ops(logits))  # bf16 in: were they promoted to float32? (no)
fed_fp32 = dtypes(passthrough_ops(logits.float()))  # fp32 in: were they lowered to bf16? (no)
_claims.equal(
    "softmax_sum_layer_norm_follow_their_input_on_cpu",
    measured=sum(d == "torch.bfloat16" for d in fed_bf16.values()),
    control=sum(d == "torch.bfloat16" for d in fed_fp32.values()),  # control: the same ops fed float32
    expected=len(fed_bf16),
    fed_bf16=fed_bf16,
    fed_fp32=fed_fp32,
)

# --- 4. backward: gradient dtypes in a DDP training step ---
torch.manual_seed(0)
base = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def step_dtypes(enabled=True, model_dtype=fp32):
    model = accelerator.prepare(copy.deepcopy(base).to(model_dtype))  # DDP: backward all-reduces .grad
    first = accelerator.unwrap_model(model)[0]
    seen = {}

    def watch(module, args, output):  # record the dtype of the gradient that flows back into it
        seen["hidden"] = str(output.dtype)
        output.register_hook(lambda grad: seen.update(grad_of_hidden=str(grad.dtype)))  # returns None: grad unchanged

    first.register_forward_hook(watch)
    with autocast(enabled):
        loss = F.cross_entropy(model(x.to(model_dtype)), target % 4)
    loss.backward()
    seen.update(loss=str(loss.dtype), weight=str(first.weight.dtype), weight_grad=str(first.weight.grad.dtype))
    return seen


amp = step_dtypes()
_claims.equal(
    "backward_runs_in_the_forward_dtype",
    measured=amp["grad_of_hidden"],
    control=step_dtypes(enabled=False)["grad_of_hidden"],  # control: no autocast, float32 throughout
    expected="torch.bfloat16",
    **{f"autocast_{k}": v for k, v in amp.items()},
)
_claims.equal(
    "parameters_and_grads_stay_fp32",
    measured=[amp["weight"], amp["weight_grad"]],
    control=[(d := step_dtypes(enabled=False, model_dtype=bf16))["weight"], d["weight_grad"]],  # control: model.to(bfloat16)
    expected=["torch.float32", "torch.float32"],
)
