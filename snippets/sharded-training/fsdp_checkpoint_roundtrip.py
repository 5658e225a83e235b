# Saving and loading a sharded (FSDP2) model, two ways:
#   sharded: torch.distributed.checkpoint (DCP) writes one file per rank with that rank's shards, plus
#            .metadata; loading reshards into any model of the same shape (here a freshly initialised one)
#   full:    get_model_state_dict(..., StateDictOptions(full_state_dict=True)) all-gathers plain tensors,
#            which load into an ordinary, undistributed nn.Module
#   reshard: the same sharded checkpoint, dcp.load-ed into a plain (unsharded) model on each rank: every
#            rank reads both ranks' pieces of every tensor (load-time resharding)
# Negative controls: the same fresh model (another seed) without the load (sharded or plain); for the file sizes, the same
# DCP writer given the full state dict in one process (no_dist=True: nothing sharded); for the sizes in
# memory, the full state dict.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/sharded-training/fsdp_checkpoint_roundtrip.py
import copy
import os
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, set_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

import _claims

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
mesh = init_device_mesh("cpu", (world,))


def make_model(seed):
    set_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.Tanh(), torch.nn.Linear(256, 64))  # ~25k weights


def shard(net):
    for layer in net:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(net, mesh=mesh)
    return net


def local(value):
    """What this rank holds of a state-dict value: a DTensor's local shard, a plain tensor whole."""
    return value.to_local() if isinstance(value, DTensor) else value


def full_weights(net):
    return torch.cat([(p.full_tensor() if isinstance(p, DTensor) else p).detach().flatten() for p in net.parameters()])


set_seed(0)
x, y = torch.randn(16, 32), torch.randn(16, 64)
trained = shard(make_model(0))
optimizer = torch.optim.Adam(trained.parameters(), lr=1e-2)
for _ in range(2):  # move the weights away from their initialisation
    torch.nn.functional.mse_loss(trained(x[rank::world]), y[rank::world]).backward()
    optimizer.step()
    optimizer.zero_grad()
elements = sum(p.numel() for p in trained.parameters())

# Every rank must use the same directory: rank 0 makes it and tells the others.
temporary = tempfile.TemporaryDirectory() if rank == 0 else None
holder = [temporary.name if rank == 0 else None]
dist.broadcast_object_list(holder, src=0)
checkpoint_dir = holder[0]
try:
    # --- sharded save: each rank writes its own shards ---------------------------------------------
    sharded_sd = get_model_state_dict(trained)  # values are DTensors: this rank's shard only
    dcp.save(sharded_sd, checkpoint_id=checkpoint_dir)
    dist.barrier()
    files = sorted(os.listdir(checkpoint_dir))
    my_file = os.path.join(checkpoint_dir, f"__{rank}_0.distcp")

    # --- full state dict: gathered plain tensors -----------------------------------------------------
    full_sd = get_model_state_dict(trained, options=StateDictOptions(full_state_dict=True))
    full_path = os.path.join(checkpoint_dir, f"full_rank{rank}.pt")
    torch.save(full_sd, full_path)  # for comparison: torch.save of everything
    unsharded_dir = os.path.join(checkpoint_dir, f"unsharded_rank{rank}")
    dcp.save(full_sd, checkpoint_id=unsharded_dir, no_dist=True)  # control: the same writer, nothing sharded
    unsharded_file = os.path.join(unsharded_dir, "__0_0.distcp")

    # --- load the sharded checkpoint into a FRESH sharded model (another seed) ----------------------
    restored = shard(make_model(1))
    untouched = shard(make_model(1))  # control: the same fresh model that loads nothing
    target_sd = get_model_state_dict(restored)
    dcp.load(target_sd, checkpoint_id=checkpoint_dir)  # each rank reads the pieces of its shards
    set_model_state_dict(restored, target_sd)

    # --- load the same sharded checkpoint into a plain, UNSHARDED model: another layout -------------
    resharded = make_model(3)
    unloaded = make_model(3)  # control: the same plain model that loads nothing
    plain_sd = resharded.state_dict()  # plain tensors: each rank asks for the whole of every tensor
    dcp.load(plain_sd, checkpoint_id=checkpoint_dir)  # in place, from both ranks' files
    resharded.load_state_dict(plain_sd)

    # --- load the full state dict into a plain, undistributed model ----------------------------------
    plain = make_model(2)
    plain.load_state_dict(full_sd)
    stranger = make_model(2)  # control: the plain model without loading
    with torch.no_grad():
        sharded_out = trained(x)
        plain_diff = (plain(x) - sharded_out).abs().max().item()
        stranger_diff = (stranger(x) - sharded_out).abs().max().item()

    _claims.at_most(
        "dcp_reload_restores_weights",
        measured=(full_weights(restored) - full_weights(trained)).abs().max().item(),
        control=(full_weights(untouched) - full_weights(trained)).abs().max().item(),
        tolerance=0.0,  # a copy: bit-identical
        files=files,
    )
    _claims.at_most(
        "dcp_load_reshards_into_unsharded_model",
        measured=(full_weights(resharded) - full_weights(trained)).abs().max().item(),
        control=(full_weights(unloaded) - full_weights(trained)).abs().max().item(),
        tolerance=0.0,  # a copy: bit-identical
    )
    _claims.at_most(
        "full_state_dict_loads_into_plain_model",
        measured=plain_diff,
        control=stranger_diff,
        tolerance=1e-6,
        full_state_dict_types=sorted({type(v).__name__ for v in full_sd.values()}),
    )
    _claims.at_most(
        "each_rank_writes_its_shard",
        measured=os.path.getsize(my_file) / (elements * 4),  # this rank's DCP file / the model's fp32 bytes
        control=os.path.getsize(unsharded_file) / (elements * 4),  # DCP, one process, the full state dict
        tolerance=0.6,  # half the weights plus a little metadata
        my_distcp_bytes=os.path.getsize(my_file),
        unsharded_distcp_bytes=os.path.getsize(unsharded_file),
        full_torch_save_bytes=os.path.getsize(full_path),
        model_bytes=elements * 4,
    )
    _claims.equal(
        "sharded_state_dict_holds_local_shards",
        measured=sum(local(v).numel() for v in sharded_sd.values()) * world,  # shards x ranks = model
        control=sum(local(v).numel() for v in full_sd.values()) * world,  # full: the model on every rank
        expected=elements,
        local_elements=sum(local(v).numel() for v in sharded_sd.values()),
        full_elements=sum(v.numel() for v in full_sd.values()),
    )
finally:
    dist.barrier()  # nobody deletes the directory while another rank still reads it
    if rank == 0:
        temporary.cleanup()
