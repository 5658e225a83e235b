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
#     title: "Lab 1: a first distributed run from a notebook, and its traps"
#     processes: 2
#     timeout: 240
#     claims:
#       lab_two_processes_one_world:
#         says: >-
#           With ACCELERATE_USE_CPU=true, notebook_launcher(train, num_processes=2) gives two processes
#           in one MULTI_CPU world of 2 on gloo; without it, two processes that each see
#           DistributedType.NO and 1 process.
#         control: the same launch without ACCELERATE_USE_CPU in the notebook's environment
#         breaks_control_when: [notebook-launcher-sets-cpu-flag]
#       lab_accelerator_first_refused:
#         says: >-
#           After a cell has created an Accelerator in the notebook's own process, notebook_launcher
#           raises ValueError and starts no process (no worker writes its result).
#         control: the same call before any Accelerator exists in the notebook
#         breaks_when: [notebook-launcher-ignores-existing-accelerator]
# ---

# %% [markdown]
# # Lab 1: a first distributed run from a notebook, and its traps
#
# `accelerate.notebook_launcher(train, num_processes=2)` forks the notebook's process into 2 workers
# and runs `train` in each, as `accelerate launch` would run a script. Three traps wait:
#
# 1. **No GPU, no CPU flag.** Without a GPU, `notebook_launcher` still says "Launching training on 2
#    CUDAs" and each worker's `Accelerator()` believes it is alone. On CPU, set
#    `ACCELERATE_USE_CPU=true` first.
# 2. **An `Accelerator` created in the notebook** before the launch: the launcher refuses to start.
#    Create it inside the training function.
# 3. **A GPU touched before the fork** (a `torch.cuda` call that initialises CUDA, `.to("cuda")`, some
#    imports): CUDA cannot be re-initialised in a forked child (`torch.cuda._lazy_init` raises "Cannot
#    re-initialize CUDA in forked subprocess"). Not every `torch.cuda` call does it: the first cell calls
#    `torch.cuda.is_initialized()`, which initialises nothing. This machine has no GPU, so the lab can only
#    print that check before the fork.
#
# Run it top to bottom in Jupyter (`jupyter lab docs/labs/lab1_first_distributed_run.py`, opened as a
# notebook with jupytext), or let `python -m pytest verify -k lab1` execute it and judge its claims.

# %%
import json
import os
import pathlib
import socket
import tempfile

import torch
import torch.distributed as dist
from accelerate import Accelerator, notebook_launcher
from accelerate.state import AcceleratorState

import _claims  # the project's claim reporter (snippets/_claims.py)

# Trap 3's guard: nothing has touched CUDA in this process, so forking is safe.
print("CUDA initialised in the notebook:", torch.cuda.is_initialized())


# %%
def free_port():
    """notebook_launcher uses port 29500 unless told otherwise; on a shared machine ask for a free one."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def train(results_dir):
    """Runs in every worker. The Accelerator is created HERE, never in a notebook cell."""
    accelerator = Accelerator()
    total = torch.tensor([float(accelerator.process_index + 1)])
    if dist.is_initialized():
        dist.all_reduce(total)
    seen = {
        "rank": dist.get_rank() if dist.is_initialized() else 0,
        "world_size": dist.get_world_size() if dist.is_initialized() else 1,
        "num_processes": accelerator.num_processes,
        "process_index": accelerator.process_index,
        "backend": accelerator.state.backend,
        "distributed_type": str(accelerator.distributed_type).split(".")[-1],
        "device": str(accelerator.device),
        "sum": total.item(),
    }
    pathlib.Path(results_dir, f"{os.getpid()}.json").write_text(json.dumps(seen))


def launch(use_cpu, started=None):
    """One notebook_launcher call; returns what each worker saw. `started` (a list) gets the number of workers
    that wrote a result, also when the launcher raises."""
    if use_cpu:
        os.environ["ACCELERATE_USE_CPU"] = "true"  # <- what makes the workers use gloo on the CPU
    else:
        os.environ.pop("ACCELERATE_USE_CPU", None)
    with tempfile.TemporaryDirectory() as results_dir:
        try:
            notebook_launcher(train, args=(results_dir,), num_processes=2, use_port=free_port())
        finally:
            if started is not None:
                started.append(len(list(pathlib.Path(results_dir).glob("*.json"))))
        return sorted((json.loads(p.read_text()) for p in pathlib.Path(results_dir).glob("*.json")),
                      key=lambda seen: seen["rank"])


# %% [markdown]
# ## The right way on CPU: `ACCELERATE_USE_CPU=true`

# %%
started_before = []  # how many workers wrote a result
try:  # no Accelerator exists in the notebook yet: this call must start (the control of trap 2)
    world, before = launch(use_cpu=True, started=started_before), None
except ValueError as error:
    world, before = [], str(error)
for seen in world:
    print(seen)

# %% [markdown]
# ## Trap 1: the same call without the CPU flag
#
# Both workers say `NO` and 1 process: the training would run twice, each copy on all the data, and
# nothing would be averaged. torch.distributed itself does form a world of 2 (the printed `world_size` 2
# and `sum` 2.0 come from an all-reduce over it): with `LOCAL_RANK` set and no CPU flag,
# `PartialState.__init__` (accelerate/state.py) still calls `init_process_group`, but `_prepare_backend`
# finds no GPU, so the backend stays None and Accelerate reports `NO`; `prepare` then wraps nothing in DDP.

# %%
alone = launch(use_cpu=False)
for seen in alone:
    print(seen)
os.environ["ACCELERATE_USE_CPU"] = "true"

# %% [markdown]
# ## Trap 2: an `Accelerator` created in the notebook

# %%
print("before:", before)  # what the first launch, before any Accelerator existed here, raised: nothing

notebook_accelerator = Accelerator()  # the mistake: a cell that creates one in the notebook's process
started_after = []
try:
    launch(use_cpu=True, started=started_after)
    after = None
except ValueError as error:
    after = str(error)
print("after:", after, " workers that ran:", started_after)
AcceleratorState._reset_state(reset_partial_state=True)  # what restarting the kernel would do

# %% [markdown]
# ## Claims

# %%
refused = lambda message: "should only be initialized inside your training function" in (message or "")  # noqa: E731
_claims.equal(
    "lab_two_processes_one_world",
    measured=[[s["distributed_type"], s["num_processes"], s["backend"]] for s in world],
    control=[[s["distributed_type"], s["num_processes"], s["backend"]] for s in alone],
    expected=[["MULTI_CPU", 2, "gloo"], ["MULTI_CPU", 2, "gloo"]],
    sums=[s["sum"] for s in world],
    world=world,
    world_without_flag=alone,  # torch.distributed's rank, world_size and all-reduced sum in the control
)
_claims.equal(  # [refused with the launcher's message, number of workers that ran]
    "lab_accelerator_first_refused",
    measured=[refused(after), started_after[0]],
    control=[refused(before), started_before[0]],
    expected=[True, 0],
    error=after,
    world=world,
)
