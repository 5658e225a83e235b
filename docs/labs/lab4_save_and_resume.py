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
#     title: "Lab 4: saving and resuming a 2-process run"
#     processes: 2
#     timeout: 240
#     claims:
#       lab_resume_matches_uninterrupted:
#         says: >-
#           A run of 4 Adam steps on 2 processes, and a run that saves with save_state after step 2,
#           whose processes then exit, resumed by new processes with load_state, end with the same
#           weights (difference 0.0); resumed without load_state they end 0.84 apart.
#         control: the same second run without accelerator.load_state (fresh weights and optimizer)
#         breaks_when: [load-state-restores-nothing]
#       lab_optimizer_state_comes_back:
#         says: >-
#           After load_state and 2 more steps, Adam's step counter is 4 on both processes, as in the
#           uninterrupted run; without load_state it is 2.
#         control: the same second run without accelerator.load_state
#         breaks_when: [load-state-restores-nothing]
# ---

# %% [markdown]
# # Lab 4: saving and resuming a 2-process run
#
# `accelerator.save_state(folder)` writes the model, the optimizer (Adam's moments and step count), the
# schedulers passed to `prepare` and the gradient scaler when there are any, and every process's
# random-number generator states: the main process writes the model, optimizer and scheduler files, each
# process its own `random_states_<i>.pkl` (and, when fp16 made a scaler, `scaler.pt`, every process to the
# same name; `save_accelerator_state` in accelerate/checkpointing.py). This lab has no
# scheduler and no scaler, so its checkpoint holds `model.safetensors`, `optimizer.bin`,
# `random_states_0.pkl` and `random_states_1.pkl` (`checkpoint_files` in the evidence).
# `accelerator.load_state(folder)`, called after `prepare`, loads them back (`load_accelerator_state`);
# the claims check the weights and Adam's step counter, not the random-number states. The lab runs 4 steps
# in one go, then 2 steps + save, a "crash" (the processes end normally after saving), and 2 more steps
# in new processes after `load_state`.

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


def batch(step, rank):
    """The data of one step on one process: the same in every run."""
    generator = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 4, generator=generator), torch.randn(8, 1, generator=generator)


def train(results_dir, checkpoint, phase):
    accelerator = Accelerator()
    torch.manual_seed(0 if phase == "uninterrupted" or phase == "first_half" else 1)  # resumed runs start elsewhere
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    model, optimizer = accelerator.prepare(model, optimizer)
    steps = {"uninterrupted": range(4), "first_half": range(2), "resumed": range(2, 4), "restarted": range(2, 4)}[phase]
    if phase == "resumed":
        accelerator.load_state(checkpoint)  # <- after prepare: model, optimizer, RNG states
    for step in steps:
        inputs, targets = batch(step, accelerator.process_index)
        accelerator.backward(torch.nn.functional.mse_loss(model(inputs), targets))
        optimizer.step()
        optimizer.zero_grad()
    if phase == "first_half":
        accelerator.save_state(checkpoint)  # every process calls it
    weights = torch.cat([p.detach().flatten() for p in accelerator.unwrap_model(model).parameters()])
    adam_steps = [float(state["step"]) for state in optimizer.state_dict()["state"].values()]
    save(results_dir, accelerator, weights=weights.tolist(), adam_steps=max(adam_steps))


# %%
with tempfile.TemporaryDirectory() as checkpoint:
    uninterrupted = launch(train, checkpoint, "uninterrupted")
    launch(train, checkpoint, "first_half")  # these processes end here: the "crash"
    saved_files = sorted(p.name for p in pathlib.Path(checkpoint).iterdir())
    resumed = launch(train, checkpoint, "resumed")
    restarted = launch(train, checkpoint, "restarted")
print("checkpoint:", saved_files)

gap = lambda results: max((torch.tensor(a["weights"]) - torch.tensor(b["weights"])).abs().max().item()  # noqa: E731
                          for a, b in zip(results, uninterrupted))
print("resumed vs uninterrupted:", gap(resumed), " restarted vs uninterrupted:", gap(restarted))
print("Adam steps (uninterrupted, resumed, restarted):",
      [[r["adam_steps"] for r in results] for results in (uninterrupted, resumed, restarted)])

# %% [markdown]
# ## Claims

# %%
_claims.at_most("lab_resume_matches_uninterrupted", measured=gap(resumed), control=gap(restarted),
                tolerance=1e-6, checkpoint_files=saved_files, world=[r["world"] for r in resumed])
_claims.equal("lab_optimizer_state_comes_back", measured=[r["adam_steps"] for r in resumed],
              control=[r["adam_steps"] for r in restarted], expected=[r["adam_steps"] for r in uninterrupted],
              world=[r["world"] for r in resumed]);
