# What accelerator.unwrap_model gives back, and when you need it.
#   1. Your own methods (generate, encode, ...) are not reachable through the DDP wrapper that
#      prepare() returns; through unwrap_model they are.
#      Negative control: the same call on the prepared model (AttributeError).
#   2. With mixed_precision="bf16", unwrap_model(model) keeps the autocast that prepare() put around
#      the model's forward (keep_fp32_wrapper=True is the default): an inference call on the unwrapped
#      model still runs its Linear layers in bf16.
#      Negative control: unwrap_model(model, keep_fp32_wrapper=False), which restores the original forward.
#   3. keep_fp32_wrapper=False does that by changing the model object itself, which the DDP wrapper
#      shares: the prepared model's training forward runs in float32 from then on.
#      Negative control: the same forward of the prepared model before that call (bf16).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/accelerate-api/unwrap_model_methods_and_autocast.py
import torch
from accelerate import Accelerator

import _claims


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 1)

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))

    def embed(self, x):  # a method of your own, like generate() on a transformers model
        return torch.relu(self.body(x))


def outcome(call):
    try:
        call()
        return "ok"
    except AttributeError:
        return "AttributeError"


accelerator = Accelerator(mixed_precision="bf16")  # bf16 autocast works on CPU, and makes 2. and 3. visible
torch.manual_seed(0)
net = Encoder()
model = accelerator.prepare(net)  # DistributedDataParallel(net), forward wrapped in bf16 autocast
inputs = torch.randn(4, 16)

# 1. A method of your own.
_claims.equal(
    "own_methods_need_unwrap",
    measured=outcome(lambda: accelerator.unwrap_model(model).embed(inputs)),
    control=outcome(lambda: model.embed(inputs)),
    expected="ok",
    prepared_class=type(model).__name__,
    unwrapped_class=type(accelerator.unwrap_model(model)).__name__,
)

# 2. and 3. The dtype the first Linear computes in, seen by a forward hook.
seen = []
net.body.register_forward_hook(lambda module, args, output: seen.append(str(output.dtype)))


def inner_dtype(module):
    with torch.no_grad():
        output = module(inputs)
    return seen[-1], str(output.dtype)


prepared_before, _ = inner_dtype(model)  # training forward, as prepare() left it
kept, kept_output = inner_dtype(accelerator.unwrap_model(model))  # default keep_fp32_wrapper=True
stripped_model = accelerator.unwrap_model(model, keep_fp32_wrapper=False)
stripped, _ = inner_dtype(stripped_model)
prepared_after, _ = inner_dtype(model)  # the same DDP model, after the call above

_claims.equal(
    "unwrap_keeps_autocast_by_default",
    measured=kept,
    control=stripped,
    expected="torch.bfloat16",
    unwrapped_output_dtype=kept_output,  # convert_outputs_to_fp32: the model's outputs come back float32
)
_claims.equal(
    "keep_fp32_wrapper_false_changes_the_prepared_model",
    measured=prepared_after,
    control=prepared_before,
    expected="torch.float32",
    same_object=stripped_model is net,  # no copy: unwrap_model hands back the module DDP wraps
)
