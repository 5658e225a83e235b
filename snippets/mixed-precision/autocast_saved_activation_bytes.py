# What mixed precision saves in memory, and what it does not, measured on 2 DDP ranks.
# torch.autograd.graph.saved_tensors_hooks sees every tensor the forward pass keeps for backward;
# each is counted once per storage and sorted into: the parameters themselves (no new memory),
# 16-bit copies of weights that autocast made, and activations (everything else).
#  * activations kept for backward: ~2 bytes per element under bf16 autocast instead of 4;
#  * autocast keeps a bf16 copy of each Linear weight that backward needs (2 bytes per weight), one per
#    autocast region thanks to its cast cache;
#  * so at a tiny batch autocast holds MORE than float32; at a large batch it holds less;
#  * parameters + gradients + Adam state stay 16 bytes per parameter (all float32).
# Controls: no autocast (float32 throughout); cache_enabled=False; a large batch; a model cast to bf16.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/mixed-precision/autocast_saved_activation_bytes.py
import copy

import torch
import torch.nn.functional as F
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
torch.manual_seed(0)
base = torch.nn.Sequential(
    torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 8)
)
# The first Linear's weight is not needed by backward: its input is data, which needs no gradient.
needed_weight_elements = sum(m.weight.numel() for m in list(base)[2:] if isinstance(m, torch.nn.Linear))


def saved_bytes(batch, enabled=True, cache_enabled=True, repeat=1):
    """Bytes the forward keeps for backward, by kind, each storage counted once."""
    model = accelerator.prepare(copy.deepcopy(base))
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    weights = [m.weight.detach() for m in accelerator.unwrap_model(model) if isinstance(m, torch.nn.Linear)]
    storages = {}

    def is_copy_of_a_weight(t):  # saved as is or transposed (addmm keeps weight.t())
        return t.dtype != torch.float32 and any(
            t.shape == v.shape and torch.equal(t, v.to(t.dtype)) for w in weights for v in (w, w.t())
        )

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() in params:
            kind = "parameter"
        elif is_copy_of_a_weight(t):
            kind = "weight_copy"  # a 16-bit copy autocast made of a parameter
        else:
            kind = "activation"
        storages[storage.data_ptr()] = (kind, storage.nbytes(), t.numel(), t.element_size())
        return t

    x, y = torch.randn(batch, 64), torch.randn(batch, 8)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled, cache_enabled=cache_enabled):
            out = sum(model(x) for _ in range(repeat))  # repeat=2: the same layers twice in one region
            loss = F.mse_loss(out, y)
    loss.backward()
    total = {"parameter": 0, "weight_copy": 0, "activation": 0}
    copies = 0
    elements = 0
    for kind, nbytes, numel, size in storages.values():
        total[kind] += nbytes
        copies += kind == "weight_copy"
        elements += numel if kind == "activation" else 0
    total["weight_copies"] = copies
    total["activation_elements"] = elements
    return total


big, big_fp32 = saved_bytes(128), saved_bytes(128, enabled=False)
_claims.between(
    "activations_take_half_the_bytes",
    measured=big["activation"] / big["activation_elements"],  # bytes per saved activation element
    control=big_fp32["activation"] / big_fp32["activation_elements"],  # control: no autocast
    low=1.9,
    high=2.5,
    activation_bytes_autocast=big["activation"],
    activation_bytes_fp32=big_fp32["activation"],
    batch=128,
)
_claims.equal(
    "autocast_keeps_bf16_copies_of_weights",
    measured=big["weight_copy"],
    control=big_fp32["weight_copy"],  # control: no autocast; backward uses the parameters themselves
    expected=2 * needed_weight_elements,  # 2 bytes for each weight of layers 2 and 3
    weight_elements_needed_by_backward=needed_weight_elements,
    copies=big["weight_copies"],
)
twice = saved_bytes(128, repeat=2)
_claims.equal(
    "cast_cache_makes_one_copy_per_region",
    measured=twice["weight_copies"],
    control=saved_bytes(128, repeat=2, cache_enabled=False)["weight_copies"],  # control: cache_enabled=False
    expected=2,  # layers 2 and 3, each run twice in one autocast region
)
small, small_fp32 = saved_bytes(4), saved_bytes(4, enabled=False)
held = lambda t: t["activation"] + t["weight_copy"]  # noqa: E731  new memory kept until backward
_claims.at_least(
    "tiny_batch_autocast_holds_more",
    measured=held(small) / held(small_fp32),
    control=held(big) / held(big_fp32),  # control: the same ratio at batch 128
    bound=1.5,  # "more", not "as much": a ratio of 1.0 (autocast doing nothing) must fail
    held_autocast_batch_4=held(small),
    held_fp32_batch_4=held(small_fp32),
    held_autocast_batch_128=held(big),
    held_fp32_batch_128=held(big_fp32),
)


# --- Model states: what autocast does not touch ---
def model_state_bytes_per_parameter(dtype):
    model = accelerator.prepare(copy.deepcopy(base).to(dtype))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        F.mse_loss(model(torch.randn(8, 64, dtype=dtype)), torch.randn(8, 8, dtype=dtype)).backward()
    optimizer.step()
    params = list(model.parameters())
    states = [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0]
    nbytes = sum(t.numel() * t.element_size() for t in params + [p.grad for p in params] + states)
    return nbytes / sum(p.numel() for p in params)


_claims.equal(
    "model_states_stay_16_bytes_per_parameter",
    measured=model_state_bytes_per_parameter(torch.float32),
    control=model_state_bytes_per_parameter(torch.bfloat16),  # control: the model itself cast to bf16
    expected=16.0,
    parameters=sum(p.numel() for p in base.parameters()),
)
