# Which parallelism fits the model? The first number to know is what one rank must hold. Under DDP each
# rank holds the whole training state (weights, gradients, AdamW moments); under FSDP2 (torch's
# fully_shard, ZeRO-3 style) each rank holds 1/N of it between steps. Measured from the tensors each
# rank really holds after one AdamW step. Negative control: the same model and step under DDP.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/model-parallelism/per_rank_state_ddp_vs_fsdp.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import copy

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import _claims

accelerator = Accelerator()
world = accelerator.num_processes
set_seed(0)
reference = torch.nn.Sequential(*(torch.nn.Linear(128, 128) for _ in range(4))).to(accelerator.device)
full_parameters = sum(p.numel() for p in reference.parameters())
x = torch.randn(8, 128, device=accelerator.device)


def local_bytes(tensor):
    """Bytes this rank stores for a tensor: its shard if it is a DTensor, else all of it."""
    local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
    return local.numel() * local.element_size()


def share_of_training_state(model, optimizer):
    """This rank's bytes of weights, gradients and AdamW state, over what one whole copy takes."""
    model(x).pow(2).mean().backward()
    optimizer.step()
    held = sum(local_bytes(p) + local_bytes(p.grad) for p in model.parameters())
    held += sum(local_bytes(t) for s in optimizer.state.values() for k, t in s.items() if k != "step")
    return held / (full_parameters * 4 * 4)  # one copy: 4 tensors of 4 bytes per parameter


ddp = accelerator.prepare(copy.deepcopy(reference))
ddp_share = share_of_training_state(ddp, torch.optim.AdamW(ddp.parameters()))

sharded = copy.deepcopy(reference)
mesh = init_device_mesh(accelerator.device.type, (world,))
for layer in sharded:
    fully_shard(layer, mesh=mesh)  # each Linear is a unit: gathered before use, freed after
fully_shard(sharded, mesh=mesh)
fsdp_share = share_of_training_state(sharded, torch.optim.AdamW(sharded.parameters()))

_claims.between(
    "fsdp_rank_holds_one_nth_of_the_training_state",
    measured=fsdp_share,
    control=ddp_share,
    low=0.95 / world,
    high=1.05 / world,
    world_size=world,
    parameters=full_parameters,
)
