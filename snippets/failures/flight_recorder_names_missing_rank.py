# What the flight recorder keeps, and how it names the rank that never joined. torch 2.13's flight recorder
# (torch/csrc/distributed/c10d/FlightRecorder.hpp) is a ring buffer of the last collectives each process
# issued, with their sequence number per group, op, sizes and timeout; it records for gloo groups too, so
# it can be read here on CPU with torch._C._distributed_c10d._dump_fr_trace() (the same dump NCCL writes
# to TORCH_NCCL_DEBUG_INFO_TEMP_FILE on a watchdog timeout). The run leaves TORCH_NCCL_TRACE_BUFFER_SIZE
# (and TORCH_FR_BUFFER_SIZE) unset, so it reads the default buffer.
# The hang runs in a pair of forked processes with a 2-rank gloo world of their own, never in the
# harness's ranks: a group left with a timed-out collective in a process that goes on running other
# snippets can bring that process down later (a run once crashed after both ranks had printed PASS).
# In the pair, rank 1 skips the second all_reduce of a group with a 1-s timeout; rank 0 waits in it, and
# the group's timeout ends the wait (the gloo analogue of the NCCL watchdog; the timeout itself is proven
# on launching/process-group-timeouts). Rank 1 stays alive, so rank 0 sees a timeout, not a closed peer.
# Each child sends its own flight-recorder records to the parent; the rank whose last sequence number in
# that group is behind the other's is the one that never joined. Both children are killed at the end.
# Negative control: the same two all_reduces on another group of the pair, both ranks joining both.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/failures/flight_recorder_names_missing_rank.py
#   (~1.5 s: the pair's rank 0 waits for the 1-s timeout)
import datetime
import gc
import multiprocessing
import os
import pickle
import queue
import socket
import time
import uuid

import torch
import torch.distributed as dist
from accelerate import Accelerator
from torch._C import _distributed_c10d
from torch.distributed import distributed_c10d

import _claims

TIMEOUT = datetime.timedelta(seconds=1)
HARD_DEADLINE_S = 60  # no child outlives this, whatever happens
LISTEN_S = 30.0  # the parent waits this long at most for both children's records (~1.5 s)
# The forked children inherit this process's flight recorder, with the harness's own groups in it: the
# pair's groups carry this run's token in their description, and only their entries are read.
RUN_TOKEN = uuid.uuid4().hex[:8]
BOTH_JOIN, ONE_SKIPS = f"both_join_{RUN_TOKEN}", f"one_skips_{RUN_TOKEN}"

accelerator = Accelerator()


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def two_all_reduces(group, rank, skipping_rank):
    """Two all_reduces on `group`; `skipping_rank` (None: nobody) never calls the second one."""
    dist.all_reduce(torch.ones(4), group=group)
    if rank == skipping_rank:
        return "skipped", 0.0
    started = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4), group=group)
        return "returned", time.monotonic() - started
    except RuntimeError:  # the group's timeout ended the wait
        return "timed out", time.monotonic() - started


def records(trace, group_desc):
    """This process's last sequence number for the group so described, and the entries' ops and timeouts."""
    entries = [entry for entry in trace["entries"] if entry["process_group"][1] == group_desc]
    return {
        "last_sequence_number": max((entry["collective_seq_id"] for entry in entries), default=0),
        "ops": [entry["profiling_name"] for entry in entries],
        "timeouts_ms": [entry["timeout_ms"] for entry in entries],
    }


def member(rank, port, results):
    """One process of the forked pair: both all_reduces on each group, rank 1 skipping one, then its records."""
    gc.disable()  # never collect the parent's garbage here: freeing a torch process group in a forked child can abort it
    inherited = distributed_c10d._world  # the harness's group, copied by fork: keep it alive, never use it
    distributed_c10d._world = distributed_c10d._World()  # a world with no group in it, as in a new process
    for variable in [v for v in os.environ if v.startswith("TORCHELASTIC_")]:
        del os.environ[variable]  # TORCHELASTIC_USE_AGENT_STORE would make the pair clients of a store nobody serves
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=TIMEOUT)
        # Both groups are created by both children in the same order.
        both_join = dist.new_group(backend="gloo", timeout=TIMEOUT, group_desc=BOTH_JOIN)
        one_skips = dist.new_group(backend="gloo", timeout=TIMEOUT, group_desc=ONE_SKIPS)
        control_outcome = two_all_reduces(both_join, rank, skipping_rank=None)
        hang_outcome = two_all_reduces(one_skips, rank, skipping_rank=1)
        trace = pickle.loads(_distributed_c10d._dump_fr_trace())  # this process's ring buffer
        results.put({
            "rank": rank, "control": records(trace, BOTH_JOIN), "hang": records(trace, ONE_SKIPS),
            "control_outcome": control_outcome[0], "hang_outcome": hang_outcome[0],
            "waited_s": round(hang_outcome[1], 2),
            "buffer_size_variables": [os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE"), os.environ.get("TORCH_FR_BUFFER_SIZE")],
        })  # fmt: skip
        results.close()
        results.join_thread()  # put() hands the item to a feeder thread: flush it before waiting
        time.sleep(HARD_DEADLINE_S)  # rank 1 stays, so rank 0's wait ends by the timeout; the parent kills both
    except BaseException as error:  # noqa: BLE001  report anything, then leave without cleanup
        results.put({"rank": rank, "crashed": repr(error)[-300:]})
        results.close()
        results.join_thread()
    finally:
        del inherited
        os._exit(0)  # no atexit, no teardown of the copied harness group


def behind(last_sequence_numbers):
    """The ranks whose last sequence number is below the highest one: they never issued that collective."""
    return [rank for rank, value in enumerate(last_sequence_numbers) if value < max(last_sequence_numbers)]


if accelerator.is_main_process:
    gc.collect()  # free the parent's garbage (a destroyed process group, say) in the parent, before forking
    context = multiprocessing.get_context("fork")  # the children start with torch already imported
    results = context.Queue()
    port = free_port()
    children = [context.Process(target=member, args=(rank, port, results), daemon=True) for rank in (0, 1)]
    seen = {}
    started = time.monotonic()
    try:
        for child in children:
            child.start()
        while len(seen) < 2 and time.monotonic() < started + LISTEN_S:
            try:
                report = results.get(timeout=0.05)
            except queue.Empty:
                continue
            seen[report["rank"]] = report
        listened_s = time.monotonic() - started
    finally:
        for child in children:
            child.kill()
        for child in children:
            child.join(timeout=10)

    def last_numbers(which):
        return [(seen.get(rank) or {}).get(which, {}).get("last_sequence_number", 0) for rank in (0, 1)]

    _claims.equal(
        "flight_recorder_names_missing_rank",
        measured=behind(last_numbers("hang")),
        control=behind(last_numbers("control")),
        expected=[1],
        last_sequence_numbers=last_numbers("hang"),
        ops_recorded=[(seen.get(rank) or {}).get("hang", {}).get("ops") for rank in (0, 1)],
        timeouts_ms=[(seen.get(rank) or {}).get("hang", {}).get("timeouts_ms") for rank in (0, 1)],
        control_last_sequence_numbers=last_numbers("control"),
        outcomes=[(seen.get(rank) or {}).get("hang_outcome") for rank in (0, 1)],
        control_outcomes=[(seen.get(rank) or {}).get("control_outcome") for rank in (0, 1)],
        waited_s=[(seen.get(rank) or {}).get("waited_s") for rank in (0, 1)],
        crashed=[(seen.get(rank) or {}).get("crashed") for rank in (0, 1)],
        buffer_size_variables=(seen.get(0) or {}).get("buffer_size_variables"),
        listened_s=round(listened_s, 2),
        exit_codes=[child.exitcode for child in children],  # -9: killed by us at the end, as planned
    )
accelerator.wait_for_everyone()  # rank 1 waits here while rank 0's children run
