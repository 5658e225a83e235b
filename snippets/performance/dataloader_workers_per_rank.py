# DataLoader workers are per process: under accelerate, every rank builds its own DataLoader, and
# prepare() keeps its num_workers, so each rank starts num_workers worker processes of its own, and the
# job runs ranks * num_workers of them. Counted as the live direct child processes of each rank while it
# iterates (the workers are the rank's children with the fork start method, Linux's default up to Python
# 3.13; under forkserver they would be the fork server's), and as the distinct worker pids gathered from
# all ranks. Negative control: the same prepared DataLoader with num_workers=0, where the rank loads its
# batches itself and starts no child process.
# Also shown (not judged): on a machine without an accelerator, pin_memory=True survives prepare() but
# the batch comes back unpinned.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/performance/dataloader_workers_per_rank.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import warnings

import psutil
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

import _claims

NUM_WORKERS = 2

accelerator = Accelerator()
dataset = TensorDataset(torch.arange(16.0).unsqueeze(1))
me = psutil.Process()


def workers_while_iterating(num_workers, pin_memory=False):
    """Child processes of this rank while its prepared DataLoader is mid-epoch, and what it yielded."""
    loader = accelerator.prepare(DataLoader(dataset, batch_size=2, num_workers=num_workers, pin_memory=pin_memory))
    before = {child.pid for child in me.children()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        iterator = iter(loader)
        first = next(iterator)  # the workers start with the iterator and stay until the epoch ends
    workers = [(child.pid, child.ppid()) for child in me.children() if child.pid not in before]
    rows = first[0].flatten().tolist() + [v for (b,) in iterator for v in b.flatten().tolist()]
    return dict(workers=workers, kept=loader.num_workers, rows=rows, first=first[0], loader=loader,
                warned_no_accelerator=any("no accelerator is found" in str(w.message) for w in caught))  # fmt: skip


run = workers_while_iterating(NUM_WORKERS)
control = workers_while_iterating(0)  # control: the same loader, no workers
pids = accelerator.gather_for_metrics([pid for pid, _ in run["workers"]], use_gather_object=True)
control_pids = accelerator.gather_for_metrics([pid for pid, _ in control["workers"]], use_gather_object=True)
pinned = workers_while_iterating(0, pin_memory=True)  # shown only: what pin_memory=True does here

_claims.equal(
    "each_rank_forks_its_own_workers",
    measured=len(run["workers"]),
    control=len(control["workers"]),
    expected=NUM_WORKERS,
    prepared_loader_num_workers=run["kept"],
    worker_parent_pid=sorted({parent for _, parent in run["workers"]}),
    rank_pid=me.pid,
    worker_start_method=torch.multiprocessing.get_start_method(),
    rows_this_rank=len(run["rows"]),
    rows_this_rank_without_workers=len(control["rows"]),
)

_claims.equal(
    "job_runs_ranks_times_workers",
    measured=len(set(pids)),
    control=len(set(control_pids)),
    expected=NUM_WORKERS * accelerator.num_processes,
    ranks=accelerator.num_processes,
    num_workers=NUM_WORKERS,
    accelerator_available=torch.accelerator.is_available(),
    pin_memory_kept_by_prepare=pinned["loader"].pin_memory,
    pin_memory_batch_is_pinned=pinned["first"].is_pinned(),
    pin_memory_warned_no_accelerator=pinned["warned_no_accelerator"],
)
