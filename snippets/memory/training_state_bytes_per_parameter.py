# What training memory the model's state takes, counted from the tensors torch really holds after one
# step under DDP: float32 weights (4 bytes/param) + gradients (4) + AdamW's two moments (8) = 16 bytes
# per parameter, before activations and DDP's buckets. Negative control: the same step with plain SGD,
# which keeps no optimizer state (8 bytes per parameter).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/memory/training_state_bytes_per_parameter.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed

import _claims

accelerator = Accelerator()


def bytes_per_parameter(make_optimizer):
    """Bytes of weights, gradients and optimizer state per parameter after one training step."""
    set_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    model, optimizer = accelerator.prepare(model, make_optimizer(model.parameters()))
    accelerator.backward(model(torch.randn(8, 256, device=accelerator.device)).pow(2).mean())
    optimizer.step()  # Adam allocates its state lazily, on the first step
    parameters = list(model.parameters())
    count = sum(p.numel() for p in parameters)
    weights = sum(p.numel() * p.element_size() for p in parameters)
    gradients = sum(p.grad.numel() * p.grad.element_size() for p in parameters)
    state = sum(t.numel() * t.element_size() for s in optimizer.optimizer.state.values() for t in s.values()
                if torch.is_tensor(t))  # fmt: skip
    return (weights + gradients + state) / count, state / count, count


adam_total, adam_state, parameters = bytes_per_parameter(lambda params: torch.optim.AdamW(params, lr=1e-3))
sgd_total, sgd_state, _ = bytes_per_parameter(lambda params: torch.optim.SGD(params, lr=1e-3))

_claims.between(
    "adam_training_state_is_16_bytes_per_parameter",
    measured=adam_total,
    control=sgd_total,
    low=15.9,
    high=16.1,
    parameters=parameters,
    adam_state_bytes_per_parameter=adam_state,
    sgd_state_bytes_per_parameter=sgd_state,
)
