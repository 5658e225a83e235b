# FSDP1 and FSDP2 shard differently. FSDP1 (FullyShardedDataParallel) concatenates a unit's parameters
# into one flat parameter and gives each rank a contiguous 1/N slice of it, so with the default
# use_orig_params=False the module exposes one 1-D parameter per unit, and a rank's slice can cut
# through a weight. FSDP2 (fully_shard) keeps every parameter, as a DTensor split by rows (Shard(0)),
# so each rank holds 1/N of the rows of every parameter.
# Negative controls: the other FSDP on the same model.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/sharded-training/fsdp1_vs_fsdp2_parameters.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import copy

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard

import _claims

accelerator = Accelerator()
world = accelerator.num_processes
set_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
original_count = len(list(model.parameters()))

device = torch.device("cpu") if accelerator.device.type == "cpu" else accelerator.device  # FSDP1 wants plain "cpu"
fsdp1 = FullyShardedDataParallel(copy.deepcopy(model), device_id=device)
fsdp1_views = FullyShardedDataParallel(copy.deepcopy(model), device_id=device, use_orig_params=True)
fsdp2 = copy.deepcopy(model)
fully_shard(fsdp2, mesh=init_device_mesh(accelerator.device.type, (world,)))


def share_holding_one_nth_of_rows(sharded, full=model):
    """Share of the original parameters of which this rank holds exactly 1/N of the rows."""
    held = 0
    for local, whole in zip(sharded.parameters(), full.parameters()):
        local = local.to_local() if hasattr(local, "to_local") else local
        held += local.numel() == whole.numel() // world and (local.dim() == whole.dim())
    return held / original_count


_claims.equal(
    "fsdp1_exposes_one_flat_parameter_per_unit",
    measured=len(list(fsdp1.parameters())),
    control=len(list(fsdp2.parameters())),
    expected=1,
    flat_parameter_elements=[p.numel() for p in fsdp1.parameters()],
    original_parameters=original_count,
)
_claims.equal(
    "fsdp2_shards_every_parameter_by_rows",
    measured=share_holding_one_nth_of_rows(fsdp2),
    control=share_holding_one_nth_of_rows(fsdp1_views),
    expected=1.0,
    fsdp1_local_elements_per_parameter=[p.numel() for p in fsdp1_views.parameters()],
    fsdp2_local_shapes=[list(getattr(p, "to_local", lambda: p)().shape) for p in fsdp2.parameters()],
)
