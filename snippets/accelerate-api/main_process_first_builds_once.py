# Prepare a dataset once and let the other ranks reuse it: main_process_first() lets the main process
# run the block first (the others wait at a barrier), then every other rank runs the same block and
# finds the cache the main process wrote. On several nodes, what "once" means depends on where the
# cache lives: with a disk per node, main_process_first prepares on node 0 and then on every rank of
# the other nodes at once; local_main_process_first prepares once per node.
# Written for 2 nodes of 2 processes (the harness runs both nodes on 127.0.0.1; a "node-local" cache
# is a folder per node). Controls: the same block with no context (every rank at once), and
# main_process_first with node-local caches.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_machines 2 --machine_rank R --num_processes 4 \
#       --main_process_ip 127.0.0.1 --main_process_port PORT snippets/accelerate-api/main_process_first_builds_once.py
#   (one command per machine rank R = 0, 1; ACCELERATE_USE_CPU=true only on a machine without GPUs)
import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch
from accelerate import Accelerator

import _claims

BUILD_S = 0.2  # the expensive preparation (download, tokenisation) stands in as a sleep

accelerator = Accelerator()
node = int(os.environ.get("GROUP_RANK", 0))  # the launcher's node (machine rank)

# One scratch folder for the whole run, created by rank 0 and shared (every "node" is this machine).
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


shared = root / "shared"  # a filesystem every node sees
node_local = root / f"node{node}"  # a disk of this node only
once = builds(accelerator.main_process_first, shared / "a")
everyone_at_once = builds(contextlib.nullcontext, shared / "b")
per_node = builds(accelerator.local_main_process_first, node_local / "c")
global_first_node_local = builds(accelerator.main_process_first, node_local / "d")

_claims.equal(
    "main_process_first_builds_once",
    measured=once,
    control=everyone_at_once,
    expected=1,
    processes=accelerator.num_processes,
    cache="shared folder",
)
_claims.equal(
    "local_main_first_builds_once_per_node",
    measured=per_node,
    control=global_first_node_local,
    expected=2,
    nodes=2,
    cache="one folder per node",
)

accelerator.wait_for_everyone()
if accelerator.is_main_process:
    shutil.rmtree(root, ignore_errors=True)
