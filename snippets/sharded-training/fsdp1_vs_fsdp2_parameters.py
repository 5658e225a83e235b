# FSDP1 and FSDP2 shard differently. FSDP1 (FullyShardedDataParallel) concatenates a unit's parameters
# into one flat parameter and gives each rank a contiguous 1/N slice of it, so with the default
# use_orig_params=False the module exposes one 1-D parameter per unit, and a rank's slice can cut
# through a weight. FSDP2 (fully_shard) keeps every parameter, as a DTensor split by rows (Shard(0)),
# so each rank holds 1/N of the rows of every parameter.
# Negative controls: FSDP1 on the same model with use_orig_params=True (the flat parameter no longer
# exposed), and fully_shard on the same model with a shard_placement_fn that splits matrices by columns.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/sharded-training/fsdp1_vs_fsdp2_parameters.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import copy

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard
from torch.distributed.tensor import Shard

import _claims

accelerator = Accelerator()
world = accelerator.num_processes
set_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
original_count = len(list(model.parameters()))

device = torch.device("cpu") if accelerator.device.type == "cpu" else accelerator.device  # FSDP1 wants plain "cpu"
fsdp1 = FullyShardedDataParallel(copy.deepcopy(model), device_id=device)
fsdp1_views = FullyShardedDataParallel(copy.deepcopy(model), device_id=device, use_orig_params=True)
mesh = init_device_mesh(accelerator.device.type, (world,))
fsdp2 = copy.deepcopy(model)
fully_shard(fsdp2, mesh=mesh)
fsdp2_by_columns = copy.deepcopy(model)  # control: the same fully_shard, matrices split on dim 1 instead
fully_shard(fsdp2_by_columns, mesh=mesh, shard_placement_fn=lambda p: Shard(1) if p.dim() > 1 else Shard(0))


def local_shapes(sharded):
    return [list(getattr(p, "to_local", lambda: p)().shape) for p in sharded.parameters()]


def share_holding_one_nth_of_rows(sharded, full=model):
    """Share of the original parameters of which this rank holds 1/N of the rows and every column."""
    held = 0
    for local, whole in zip(local_shapes(sharded), full.parameters()):
        held += local == [whole.shape[0] // world, *whole.shape[1:]]
    return held / original_count


_claims.equal(
    "fsdp1_exposes_one_flat_parameter_per_unit",
    measured=len(list(fsdp1.parameters())),
    control=len(list(fsdp1_views.parameters())),
    expected=1,
    flat_parameter_elements=[p.numel() for p in fsdp1.parameters()],
    flat_parameter_dims=[p.dim() for p in fsdp1.parameters()],
    original_parameters=original_count,
    fsdp2_parameters=len(list(fsdp2.parameters())),
)
_claims.equal(
    "fsdp2_shards_every_parameter_by_rows",
    measured=share_holding_one_nth_of_rows(fsdp2),
    control=share_holding_one_nth_of_rows(fsdp2_by_columns),
    expected=1.0,
    fsdp2_local_shapes=local_shapes(fsdp2),
    control_local_shapes=local_shapes(fsdp2_by_columns),
    fsdp1_views_share=share_holding_one_nth_of_rows(fsdp1_views),
    fsdp1_local_elements_per_parameter=[p.numel() for p in fsdp1_views.parameters()],
)
