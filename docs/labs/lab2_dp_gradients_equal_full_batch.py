# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     notebook_metadata_filter: proof
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
#   proof:
#     title: "Lab 2: data-parallel gradients equal the full-batch gradient"
#     processes: 2
#     timeout: 240
#     claims:
#       lab_ddp_gradient_is_full_batch_gradient:
#         says: >-
#           Two processes, each on half of a batch of 16, end backward with the gradient one process
#           computes on all 16 samples (max difference 3e-8, float rounding); inside no_sync each keeps
#           its own half-batch gradient, 0.46 away.
#         control: accelerator.no_sync(model), so DDP skips the all-reduce
#         breaks_when: [ddp-sums-gradients, ddp-skips-allreduce]
#         breaks_control_when: [no-sync-still-allreduces]
#       lab_both_ranks_hold_the_same_gradient:
#         says: >-
#           After DDP's all-reduce both processes hold bit-identical gradients (difference 0.0); without
#           it they differ.
#         control: accelerator.no_sync(model), so DDP skips the all-reduce
#         breaks_when: [ddp-reduces-to-rank0, ddp-skips-allreduce]
#         breaks_control_when: [no-sync-still-allreduces]
# ---

# %% [markdown]
# # Lab 2: data-parallel gradients equal the full-batch gradient
#
# Data parallelism splits a batch over processes; each computes the gradient of the mean loss on its
# share, and DistributedDataParallel all-reduces (averages) them during `backward`. With equal shares
# and a mean loss, the average of the half-batch gradients **is** the full-batch gradient. The lab
# measures it on 2 processes started from this notebook, against one process on the whole batch, and
# again inside `no_sync` (no all-reduce) as the control.

# %%
import json
import os
import pathlib
import socket
import tempfile

import torch
import torch._dynamo  # noqa: F401  DDP imports it on first use: import once here, every forked worker inherits it
from accelerate import Accelerator, notebook_launcher

import _claims  # the project's claim reporter (snippets/_claims.py)

os.environ["ACCELERATE_USE_CPU"] = "true"  # no GPU here: without this each worker runs alone (lab 1)
assert not torch.cuda.is_initialized()  # nothing may touch CUDA before notebook_launcher forks


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def world_of(accelerator):
    """What this worker runs on: reported with every claim, and checked by `pytest verify`."""
    return {"rank": accelerator.process_index, "world_size": torch.distributed.get_world_size(),
            "num_processes": accelerator.num_processes, "backend": accelerator.state.backend,
            "distributed_type": str(accelerator.distributed_type).split(".")[-1], "device": str(accelerator.device)}


def launch(function, *args):
    """notebook_launcher on 2 processes; each worker returns a dict by writing it to a file."""
    with tempfile.TemporaryDirectory() as results_dir:
        notebook_launcher(function, args=(results_dir, *args), num_processes=2, use_port=free_port())
        found = [json.loads(p.read_text()) for p in pathlib.Path(results_dir).glob("*.json")]
    return sorted(found, key=lambda result: result["world"]["rank"])


def save(results_dir, accelerator, **result):
    pathlib.Path(results_dir, f"{accelerator.process_index}.json").write_text(
        json.dumps({"world": world_of(accelerator), **result}))


def make_model():
    torch.manual_seed(0)  # the same starting weights in the notebook and in every worker
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


generator = torch.Generator().manual_seed(1)
inputs, targets = torch.randn(16, 4, generator=generator), torch.randn(16, 1, generator=generator)


def train(results_dir, inputs, targets, sync):
    accelerator = Accelerator()
    model = accelerator.prepare(make_model())  # wrapped in DistributedDataParallel
    half = slice(accelerator.process_index * 8, (accelerator.process_index + 1) * 8)  # this worker's share
    with accelerator.no_sync(model) if not sync else torch.enable_grad():
        loss = torch.nn.functional.mse_loss(model(inputs[half]), targets[half])
        accelerator.backward(loss)
    gradient = torch.cat([p.grad.flatten() for p in model.parameters()])
    save(results_dir, accelerator, gradient=gradient.tolist())


# %%
synced = launch(train, inputs, targets, True)
unsynced = launch(train, inputs, targets, False)

# One process, the whole batch: the reference.
reference = make_model()
torch.nn.functional.mse_loss(reference(inputs), targets).backward()
full = torch.cat([p.grad.flatten() for p in reference.parameters()])

gap = lambda results: max((torch.tensor(r["gradient"]) - full).abs().max().item() for r in results)  # noqa: E731
spread = lambda results: (torch.tensor(results[0]["gradient"]) - torch.tensor(results[1]["gradient"])).abs().max().item()  # noqa: E731
print("DDP vs full batch:", gap(synced), " no_sync vs full batch:", gap(unsynced))
print("rank 0 vs rank 1 with DDP:", spread(synced), " without:", spread(unsynced))

# %% [markdown]
# ## Claims

# %%
world = [r["world"] for r in synced]
_claims.at_most("lab_ddp_gradient_is_full_batch_gradient", measured=gap(synced), control=gap(unsynced),
                tolerance=1e-6, world=world)
_claims.equal("lab_both_ranks_hold_the_same_gradient", measured=spread(synced), control=spread(unsynced),
              expected=0.0, world=world);
