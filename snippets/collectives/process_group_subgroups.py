# Process groups: dist.new_group makes a communicator over a subset of the ranks. A collective on
# it combines only its members, and only its members take part, so a rank's subgroup collective does
# not wait for ranks outside it. Negative control: the same collectives on the default (world) group.
# The ranks split into {all but the last} and {the last}. The harness runs it on 2 ranks: two groups
# of one, so rank 0's subgroup collective involves no other process. On 3 ranks ({0, 1} and {2}) rank
# 0's subgroup really communicates (with rank 1) while rank 2, outside it, is late; run that by hand:
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 3 snippets/collectives/process_group_subgroups.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import time

import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

DELAY_S = 0.3
accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
groups_of = [list(range(world - 1)), [world - 1]]  # everyone but the last rank, and the last rank
# Every rank must create every group, in the same order, even the groups it is not in.
groups = [dist.new_group(members) for members in groups_of]
mine = 0 if rank in groups_of[0] else 1
members, group = groups_of[mine], groups[mine]


def summed(over):
    value = torch.tensor([float(rank + 1)], device=accelerator.device)
    dist.all_reduce(value, group=over)
    return value.item()


members_sum = float(sum(member + 1 for member in members))  # built without any collective
_claims.equal(
    "subgroup_all_reduce_sums_only_its_members",
    measured=summed(group) - members_sum,
    control=summed(dist.group.WORLD) - members_sum,
    expected=0.0,
    members=members,
)


def seconds_in_all_reduce(over):
    """Rank 0 times its all_reduce while the last rank (not in rank 0's subgroup) arrives DELAY_S late."""
    dist.barrier()
    if rank == world - 1:
        time.sleep(DELAY_S)
    started = time.perf_counter()
    summed(over)
    return time.perf_counter() - started


in_subgroup = seconds_in_all_reduce(group)
in_world = seconds_in_all_reduce(dist.group.WORLD)
if rank == 0:  # rank 0 is not in the late rank's group: it must not wait for it
    _claims.at_most(
        "subgroup_collective_does_not_wait_for_other_ranks",
        measured=in_subgroup / DELAY_S,
        control=in_world / DELAY_S,
        tolerance=0.3,
        seconds_in_subgroup=in_subgroup,
        seconds_in_world=in_world,
        subgroup_members=members,
    )
dist.barrier()
