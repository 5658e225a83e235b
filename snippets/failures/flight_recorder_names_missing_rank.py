# What the flight recorder keeps, and how it names the rank that never joined. torch 2.13's flight recorder
# (torch/csrc/distributed/c10d/FlightRecorder.hpp) is a ring buffer of the last collectives each process
# issued, with their sequence number per group, op, sizes and timeout; it records for gloo groups too, so
# it can be read here on CPU with torch._C._distributed_c10d._dump_fr_trace() (the same dump NCCL writes
# to TORCH_NCCL_DEBUG_INFO_TEMP_FILE on a watchdog timeout). The run leaves TORCH_NCCL_TRACE_BUFFER_SIZE
# (and TORCH_FR_BUFFER_SIZE) unset, so it reads the default buffer.
# Rank 1 skips the second all_reduce of a group with a 1-s timeout; rank 0 waits in it, and the group's
# timeout ends the wait (the gloo analogue of the NCCL watchdog; the timeout itself is proven on
# launching/process-group-timeouts). Then both ranks' records are compared: the rank whose last sequence
# number in that group is behind the others' is the one that never joined.
# Negative control: the same two all_reduces on another group, both ranks joining both.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/failures/flight_recorder_names_missing_rank.py
#   (~1.5 s: rank 0 waits for the 1-s timeout)
import datetime
import os
import pickle
import time

import torch
import torch.distributed as dist
from accelerate import Accelerator
from torch._C import _distributed_c10d

import _claims

TIMEOUT = datetime.timedelta(seconds=1)

accelerator = Accelerator()
rank = accelerator.process_index
# Both groups are created by every rank in the same order; the second is never used again after the hang.
both_join = dist.new_group(backend="gloo", timeout=TIMEOUT)
one_skips = dist.new_group(backend="gloo", timeout=TIMEOUT)


def two_all_reduces(group, skipping_rank):
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


control_outcome = two_all_reduces(both_join, skipping_rank=None)
hang_outcome = two_all_reduces(one_skips, skipping_rank=1)


def last_sequence_numbers(group):
    """Per rank, the last collective sequence number the flight recorder holds for `group`, and its entries."""
    trace = pickle.loads(_distributed_c10d._dump_fr_trace())  # this process's ring buffer
    entries = [entry for entry in trace["entries"] if entry["process_group"][0] == group.group_name]
    mine = (max((entry["collective_seq_id"] for entry in entries), default=0),
            [entry["profiling_name"] for entry in entries], [entry["timeout_ms"] for entry in entries])
    everyone = [None] * accelerator.num_processes
    dist.all_gather_object(everyone, mine)  # on the default group, which nobody left hanging
    return everyone


def behind(records):
    """The ranks whose last sequence number is below the highest one: they never issued that collective."""
    last = [record[0] for record in records]
    return [index for index, value in enumerate(last) if value < max(last)]


hang_records = last_sequence_numbers(one_skips)
control_records = last_sequence_numbers(both_join)
_claims.equal(
    "flight_recorder_names_missing_rank",
    measured=behind(hang_records),
    control=behind(control_records),
    expected=[1],
    last_sequence_numbers=[record[0] for record in hang_records],
    ops_recorded=[record[1] for record in hang_records],
    timeouts_ms=[record[2] for record in hang_records],
    control_last_sequence_numbers=[record[0] for record in control_records],
    outcome_this_rank=hang_outcome[0],
    waited_s=round(hang_outcome[1], 2),
    control_outcome_this_rank=control_outcome[0],
    buffer_size_variables=[os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE"), os.environ.get("TORCH_FR_BUFFER_SIZE")],
)
dist.destroy_process_group(both_join)
