# Mixed precision does not halve the model's training state: with Accelerate's bf16 mixed precision
# (autocast around the forward) the weights, gradients and AdamW's two moments stay float32, 16 bytes
# per parameter after one DDP step, as without mixed precision. Counted from the tensors torch really
# holds. Negative control: the same step with the model itself cast to bfloat16 (8 bytes per parameter).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/memory/mixed_precision_training_state.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed

import _claims

accelerator = Accelerator(mixed_precision="bf16")


def training_state(model_dtype):
    """Bytes per parameter of weights, gradients and AdamW state after one step, and the dtypes of the first
    Linear's output and weight."""
    set_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(model_dtype)
    seen = {}
    model[0].register_forward_hook(lambda module, args, out: seen.update(matmul=out.dtype))
    model, optimizer = accelerator.prepare(model, torch.optim.AdamW(model.parameters(), lr=1e-3))
    output = model(torch.randn(8, 256, device=accelerator.device, dtype=model_dtype))  # under autocast
    accelerator.backward(output.float().pow(2).mean())
    optimizer.step()  # AdamW allocates its state lazily, on the first step
    parameters = list(model.parameters())
    tensors = parameters + [p.grad for p in parameters]
    tensors += [t for s in optimizer.optimizer.state.values() for t in s.values() if torch.is_tensor(t)]
    per_parameter = sum(t.numel() * t.element_size() for t in tensors) / sum(p.numel() for p in parameters)
    return per_parameter, str(seen["matmul"]), str(parameters[0].dtype)


mixed, matmul_dtype, weight_dtype = training_state(torch.float32)
cast, _, cast_weight_dtype = training_state(torch.bfloat16)

# Counted only when autocast really ran the first Linear in bfloat16: a world where mixed precision did
# nothing would also give 16 bytes per parameter, and must not pass for this claim.
_claims.between(
    "bf16_mixed_precision_keeps_16_bytes_per_parameter",
    measured=mixed if matmul_dtype == "torch.bfloat16" else None,
    control=cast,
    low=15.9,
    high=16.1,
    mixed_precision=accelerator.mixed_precision,
    linear_output_dtype=matmul_dtype,  # bfloat16: autocast ran the matmul in 16 bits
    weight_dtype=weight_dtype,
    control_weight_dtype=cast_weight_dtype,
)
