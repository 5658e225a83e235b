# Why every rank must call dist.new_group, even for groups it is not in: by default torch names each new
# group with a counter that every new_group call on a rank advances (_process_group_name in
# torch/distributed/distributed_c10d.py), and the name is the store prefix under which the group's
# members meet. A rank that skips a call names every later group one step behind its peers.
# Rank 0 creates the one-member group [0] while the other ranks skip that call (as "only the members need
# to call it" would have them); then every rank creates the group of all ranks, and each reports the name
# torch gave it. Negative control: the same two calls earlier in the same run, made by every rank.
# The groups are created with TORCH_GLOO_LAZY_INIT=1, so gloo connects at the first collective rather
# than at creation: no collective runs on them, and a group whose ranks disagree on its name cannot hang
# its creation. The skipping ranks then make the call they skipped, so the counters agree again.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/collectives/process_group_names.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import os

import torch.distributed as dist
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
everyone = list(range(world))
os.environ["TORCH_GLOO_LAZY_INIT"] = "1"  # read by ProcessGroupGloo when a group is created


def names_on_every_rank(group):
    """The name this rank's torch gave `group`, gathered from every rank over the default group."""
    names = [None] * world
    dist.all_gather_object(names, group.group_name)
    return names


made = []
# Control: every rank calls new_group([0]), then every rank creates the group of all ranks.
made.append(dist.new_group([0]))
made.append(dist.new_group(everyone))
when_all_call = names_on_every_rank(made[-1])
# The same two calls, but only the member of [0] (rank 0) makes the first one.
if rank == 0:
    made.append(dist.new_group([0]))
made.append(dist.new_group(everyone))
after_a_skip = names_on_every_rank(made[-1])

_claims.equal(
    "skipped_new_group_call_renames_later_groups",
    measured=len(set(after_a_skip)),  # distinct names the ranks gave the one group of all ranks
    control=len(set(when_all_call)),
    expected=2,
    names_after_a_skip=after_a_skip,
    names_when_all_call=when_all_call,
)

# Put things back for whatever runs next in this process: the skipped call, made late, brings the
# counters level again; then the groups go (non-members hold no group to destroy).
if rank != 0:
    dist.new_group([0])
for group in made:
    if group is not dist.GroupMember.NON_GROUP_MEMBER:
        dist.destroy_process_group(group)
dist.barrier()
