# Prepare a dataset once and let the other ranks reuse it: main_process_first() lets the main process
# run the block first (the others wait at a barrier), then every other rank runs the same block and
# finds the cache the main process wrote. local_main_process_first() lets the main process of each
# NODE go first; Accelerate knows a process's node only through the LOCAL_RANK the launcher sets.
#
# Part 1 is the launch as it is: one node, 2 processes (LOCAL_RANK 0 and 1), where the two context
# managers behave the same. Part 2 re-reads the environment torchrun sets for 2 nodes of 1 process
# (`--nnodes 2 --nproc-per-node 1`: LOCAL_RANK=0 and LOCAL_WORLD_SIZE=1 on every rank, GROUP_RANK = the
# node) into a fresh PartialState on the same 2 ranks and process group, and shows that
# local_main_process_first now lets both ranks in at once while main_process_first still lets only
# rank 0 go first. The ranks still share one machine, one filesystem and one gloo group; only what
# Accelerate reads to decide "node-local main" is the two-node one. The launcher's environment and
# state are put back at the end.
# Controls: the same block with no context (every rank at once); in part 2, each context manager is
# the other one's control.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/accelerate-api/main_process_first_builds_once.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs; part 2 needs the CPU/gloo path: on GPUs
#   LOCAL_RANK=0 everywhere would put both ranks on cuda:0)
import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState

import _claims

BUILD_S = 0.25  # the expensive preparation (download, tokenisation) stands in as a sleep

accelerator = Accelerator()

# One scratch folder for the whole run, created by rank 0 and shared (both ranks are on this machine).
root = [tempfile.mkdtemp(prefix="mpf-") if accelerator.is_main_process else None]
torch.distributed.broadcast_object_list(root, src=0)
root = Path(root[0])


def prepare_dataset(cache_dir):
    """Tokenise once and cache; a rank that finds the cache reuses it. Returns 1 if it built."""
    cache = cache_dir / "tokenized.pt"
    if cache.exists():
        torch.load(cache)
        return 0
    time.sleep(BUILD_S)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = cache_dir / f"tokenized.{accelerator.process_index}.tmp"
    torch.save(torch.arange(10), tmp)
    os.replace(tmp, cache)  # atomic: a reader sees no cache or a whole one
    return 1


def builds(context, cache_dir):
    """How many ranks, in the whole job, ran the preparation (all ranks enter the block)."""
    accelerator.wait_for_everyone()
    with context():
        built = prepare_dataset(cache_dir)
    total = accelerator.reduce(torch.tensor(built), reduction="sum").item()
    accelerator.wait_for_everyone()
    return total


def fresh_state(environment):
    """A new Accelerate state read from `environment` (the process group is kept: it already exists)."""
    os.environ.update(environment)
    AcceleratorState._reset_state(reset_partial_state=True)
    return Accelerator()


# Part 1: one node of 2 processes, as launched.
launched = {name: os.environ[name] for name in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK") if name in os.environ}
once = builds(accelerator.main_process_first, root / "a")
everyone_at_once = builds(contextlib.nullcontext, root / "b")
local_on_one_node = builds(accelerator.local_main_process_first, root / "c")

# Part 2: what torchrun sets for 2 nodes of 1 process each.
accelerator = fresh_state({"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": str(accelerator.process_index)})
view = {
    "local_process_index": accelerator.local_process_index,
    "is_local_main_process": accelerator.is_local_main_process,
    "is_main_process": accelerator.is_main_process,
}
global_first_two_nodes = builds(accelerator.main_process_first, root / "d")
local_first_two_nodes = builds(accelerator.local_main_process_first, root / "e")

accelerator = fresh_state(launched)  # the launcher's own view again

_claims.equal(
    "main_process_first_builds_once",
    measured=once,
    control=everyone_at_once,
    expected=1,
    processes=accelerator.num_processes,
    cache="one folder",
)
_claims.equal(
    "local_main_first_same_on_one_node",
    measured=local_on_one_node,
    control=everyone_at_once,
    expected=1,
    processes=accelerator.num_processes,
    nodes=1,
)
_claims.equal(
    "main_process_first_global_across_nodes",
    measured=global_first_two_nodes,
    control=local_first_two_nodes,
    expected=1,
    nodes=2,
    processes_per_node=1,
    accelerate_view=view,
)
_claims.equal(
    "local_main_first_goes_first_on_each_node",
    measured=local_first_two_nodes,
    control=global_first_two_nodes,
    expected=2,
    nodes=2,
    processes_per_node=1,
    accelerate_view=view,
)

accelerator.wait_for_everyone()
if accelerator.is_main_process:
    shutil.rmtree(root, ignore_errors=True)
