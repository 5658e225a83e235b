# What accelerator.prepare() does to a model, and which device each process uses.
#   1. With 2 processes, prepare() returns the model wrapped in DistributedDataParallel.
#      Negative control: accelerator.unwrap_model() hands back the plain module class.
#   2. unwrap_model() returns the very object you passed in (same weights, no copy).
#      Negative control: the prepared object is not that object.
#   3. The device index comes from the LOCAL rank (LOCAL_RANK), not the global rank. Here, on one
#      node, both are equal, which hides the handout's `args.local_rank = int(dist.get_rank())`.
#      We read the environment torchrun gives the one process of node 2 in a 2 nodes x 1 process job
#      (RANK=1, LOCAL_RANK=0) with Accelerate's own parser. Negative control: the global rank says 1.
#   4. With device_placement left out, prepare() moves the model with model.to(accelerator.device) once.
#      Negative control: prepare_model(model, device_placement=False) never calls .to().
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/accelerate-api/prepare_wraps_model_and_picks_device.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import os
from unittest import mock

import torch
from accelerate import Accelerator
from accelerate.utils.environment import get_cpu_distributed_information

import _claims

accelerator = Accelerator()
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
prepared = accelerator.prepare(model)  # moves it to accelerator.device, then wraps it

device_module = getattr(torch, accelerator.device.type)  # torch.cuda on GPUs, torch.cpu here
_claims.equal(
    "prepare_wraps_model_in_ddp",
    measured=type(prepared).__name__,
    control=type(accelerator.unwrap_model(prepared)).__name__,
    expected="DistributedDataParallel",
    device=str(accelerator.device),
    parameters_on=str(next(prepared.parameters()).device),
    process_index=accelerator.process_index,
    local_process_index=accelerator.local_process_index,
    devices_of_this_type=device_module.device_count(),
)
_claims.equal(
    "unwrap_model_returns_original_object",
    measured=accelerator.unwrap_model(prepared) is model,
    control=prepared is model,
    expected=True,
)



class RecordsMoves(torch.nn.Linear):
    """A Linear that notes every device it is moved to with .to()."""

    def __init__(self):
        super().__init__(4, 1)
        self.moved_to = []

    def to(self, *args, **kwargs):
        self.moved_to.append(str(args[0] if args else kwargs.get("device")))
        return super().to(*args, **kwargs)


placed, left = RecordsMoves(), RecordsMoves()
accelerator.prepare(placed)  # device_placement left out, at Accelerator() and at prepare
accelerator.prepare_model(left, device_placement=False)
_claims.equal(
    "prepare_moves_the_model_by_default",
    measured=placed.moved_to,
    control=left.moved_to,
    expected=[str(accelerator.device)],
)

# The environment torchrun sets for the single process of the SECOND node (node_rank=1) of a
# `torchrun --nnodes 2 --nproc_per_node 1` job; patch.dict restores os.environ afterwards.
node_2 = {"RANK": "1", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": "1"}
with mock.patch.dict(os.environ, node_2):
    seen = get_cpu_distributed_information()  # what Accelerate reads for process_index / local_process_index
_claims.equal(
    "local_index_is_not_global_rank_on_node_2",
    measured=seen.local_rank,  # the index to pick a device on that node: cuda:0, its only GPU
    control=seen.rank,  # what int(dist.get_rank()) returns there: cuda:1 does not exist on that node
    expected=0,
    this_run_process_index=accelerator.process_index,
    this_run_local_process_index=accelerator.local_process_index,
)
