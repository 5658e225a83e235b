# accelerator.clip_grad_norm_ under DDP and under torch's fully_shard (FSDP2, DTensor gradients), and
# with gradient accumulation. Under DDP it runs after backward's all-reduce, so it returns the norm of
# the averaged gradient, the full-batch norm of one process, and clips it as one process would.
# Under fully_shard each rank holds a shard of every gradient; the DTensor-aware path combines the
# shards' norms into the full norm. With accumulate(), clip only when accelerator.sync_gradients.
# Reference: one process, the same model, the global batch, torch.nn.utils.clip_grad_norm_.
# Controls: the same step inside no_sync (no all-reduce); without the clipping call; clipping every
# micro-batch (no sync_gradients guard); the same call on each rank's local shards as plain tensors.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/accelerate-api/clip_grad_norm_global.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import copy

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

import _claims

MAX_NORM = 0.5  # well below the gradient norm, so clipping really scales
LR = 0.1
MICRO = 4  # micro-batches per optimizer step in the accumulation part
PER_RANK = 8  # samples per rank per micro-batch

accelerator = Accelerator()  # gradient_accumulation_steps=1 until part 3
rank, world = accelerator.process_index, accelerator.num_processes


def new_model():
    set_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))


def data(micro, r):
    g = torch.Generator().manual_seed(100 * micro + r)
    x = torch.randn(PER_RANK, 8, generator=g)
    return x, 5 * torch.randn(PER_RANK, 4, generator=g)  # large targets: a gradient norm well above MAX_NORM


def global_batch(micros):
    xs, ys = zip(*[data(m, r) for m in micros for r in range(world)])
    return torch.cat(xs), torch.cat(ys)


def flat_grads(model):
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def flat_params(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


# Reference: one process on the global batch of micro-batch 0 (both ranks' samples), clipped by torch.
reference = new_model()
x, y = global_batch([0])
torch.nn.functional.mse_loss(reference(x), y).backward()
reference_norm = torch.nn.utils.clip_grad_norm_(reference.parameters(), MAX_NORM).item()
reference_clipped = flat_grads(reference)

# 1. DDP: the norm clip_grad_norm_ returns, and the gradient it leaves.
model = accelerator.prepare(new_model())


def ddp_step(sync=True, clip=True):
    model.zero_grad()
    x, y = data(0, rank)
    with accelerator.no_sync(model) if not sync else torch.enable_grad():
        accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
    norm = accelerator.clip_grad_norm_(model.parameters(), MAX_NORM).item() if clip else None
    return norm, flat_grads(model)


ddp_norm, ddp_clipped = ddp_step()
local_norm, _ = ddp_step(sync=False)  # control: no all-reduce, each rank's own half-batch gradient
_, unclipped = ddp_step(clip=False)  # control: the same step without clip_grad_norm_
_claims.at_most(
    "ddp_clip_returns_global_norm",
    measured=abs(ddp_norm - reference_norm) / reference_norm,
    control=abs(local_norm - reference_norm) / reference_norm,
    tolerance=1e-5,
    returned_norm=ddp_norm,
    full_batch_norm=reference_norm,
    local_norm_without_all_reduce=local_norm,
    max_norm=MAX_NORM,
)
_claims.at_most(
    "ddp_clipped_grads_match_one_process",
    measured=(ddp_clipped - reference_clipped).abs().max().item(),
    control=(unclipped - reference_clipped).abs().max().item(),
    tolerance=1e-6,
)

# 2. torch's fully_shard (FSDP2): every gradient is a DTensor sharded over the 2 ranks.
sharded = new_model()
fully_shard(sharded, mesh=init_device_mesh("cpu", (world,)))
x, y = data(0, rank)
torch.nn.functional.mse_loss(sharded(x), y).backward()
# Control: the same call on the same gradients with the DTensor layer removed: this rank's shards as
# plain tensors (what FSDP1's flat parameters are), so nothing tells the norm about the other rank.
plain_shards = []
for p in sharded.parameters():
    shard = torch.nn.Parameter(p.detach().to_local().clone())
    shard.grad = p.grad.to_local().clone()
    plain_shards.append(shard)
shard_norm = accelerator.clip_grad_norm_(plain_shards, MAX_NORM).item()
total = accelerator.clip_grad_norm_(sharded.parameters(), MAX_NORM)
fsdp_norm = (total.full_tensor() if isinstance(total, DTensor) else total).item()
_claims.at_most(
    "fsdp2_clip_returns_global_norm",
    measured=abs(fsdp_norm - reference_norm) / reference_norm,
    control=abs(shard_norm - reference_norm) / reference_norm,
    tolerance=1e-5,
    returned_norm=fsdp_norm,
    local_shard_norm=shard_norm,
    returned_type=type(total).__name__,
    grads_are_dtensors=all(isinstance(p.grad, DTensor) for p in sharded.parameters()),
)

# 3. Accumulation: MICRO micro-batches, one optimizer step; clip only when sync_gradients.
accelerator.gradient_accumulation_steps = MICRO  # accelerator.backward now divides the loss by MICRO
reference = new_model()
reference_opt = torch.optim.SGD(reference.parameters(), lr=LR)
x, y = global_batch(range(MICRO))
torch.nn.functional.mse_loss(reference(x), y).backward()
torch.nn.utils.clip_grad_norm_(reference.parameters(), MAX_NORM)
reference_opt.step()


def accumulated_step(guard):
    acc_model = new_model()
    optimizer = torch.optim.SGD(acc_model.parameters(), lr=LR)
    acc_model, optimizer = accelerator.prepare(acc_model, optimizer)
    for micro in range(MICRO):
        with accelerator.accumulate(acc_model):
            x, y = data(micro, rank)
            accelerator.backward(torch.nn.functional.mse_loss(acc_model(x), y))
            if accelerator.sync_gradients or not guard:
                accelerator.clip_grad_norm_(acc_model.parameters(), MAX_NORM)
            optimizer.step()  # a no-op until the last micro-batch
            optimizer.zero_grad()
    return flat_params(acc_model)


guarded = accumulated_step(guard=True)
every_micro_batch = accumulated_step(guard=False)  # control: clip on every micro-batch
_claims.at_most(
    "accumulate_clip_on_sync_matches_one_process",
    measured=(guarded - flat_params(reference)).abs().max().item(),
    control=(every_micro_batch - flat_params(reference)).abs().max().item(),
    tolerance=1e-6,
    micro_batches=MICRO,
)
