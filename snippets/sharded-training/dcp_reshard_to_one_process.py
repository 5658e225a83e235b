# Resharding a checkpoint: torch.distributed.checkpoint (DCP) saves each rank's shards together with
# global metadata (which slice of which tensor each file holds), so a different number of processes,
# here ONE process with no process group, can load it into an unsharded model. Saved from 2 FSDP2
# ranks, loaded by each rank alone with no_dist=True. Negative control: the same program with the
# dcp.load left out (the unsharded model keeps its own initial weights). Reported beside it: the share
# of the elements that a rank's own shards hold (half of every weight), all a per-rank file could give.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/sharded-training/dcp_reshard_to_one_process.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import copy
import shutil
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.distributed.checkpoint.state_dict import get_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import _claims

accelerator = Accelerator()
world = accelerator.num_processes


def make_model(seed):
    set_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))


trained = make_model(0)
full_weights = {name: tensor.clone() for name, tensor in trained.state_dict().items()}
total = sum(tensor.numel() for tensor in full_weights.values())

sharded = copy.deepcopy(trained)
mesh = init_device_mesh("cpu", (world,))
for layer in (sharded[0], sharded[2]):
    fully_shard(layer, mesh=mesh)
fully_shard(sharded, mesh=mesh)
sharded_state = get_model_state_dict(sharded)  # DTensors: each rank holds its slices

folder = [tempfile.mkdtemp(prefix="dcp-") if accelerator.is_main_process else None]
dist.broadcast_object_list(folder)  # one checkpoint folder, written by every rank
dcp.save(sharded_state, checkpoint_id=folder[0])
accelerator.wait_for_everyone()



def share_restored(load):
    """Each rank, as a lone process (world size 1): a differently initialised, unsharded model, loaded
    from the checkpoint (or not); the share of its elements that equal the trained weights."""
    restored = make_model(seed=1)
    target = restored.state_dict()
    if load:
        dcp.load(target, checkpoint_id=folder[0], no_dist=True)
    restored.load_state_dict(target)
    equal = sum((restored.state_dict()[name] == weight).sum().item() for name, weight in full_weights.items())
    return equal / total


in_own_shard = sum(tensor.to_local().numel() for tensor in sharded_state.values())
_claims.equal(
    "one_process_loads_a_checkpoint_saved_by_two",
    measured=share_restored(load=True),
    control=share_restored(load=False),
    expected=1.0,
    saved_by_ranks=world,
    elements=total,
    share_in_own_shards=in_own_shard / total,
)
accelerator.wait_for_everyone()
if accelerator.is_main_process:
    shutil.rmtree(folder[0])
