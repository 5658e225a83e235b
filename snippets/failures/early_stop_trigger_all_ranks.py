# Stopping early on every rank at the same step. Only rank 1 sees the reason to stop (say, its
# validation shard stopped improving) at step 3. With accelerator.set_trigger() on that rank and
# accelerator.check_trigger() on every rank (a sum all-reduce of a 0/1 flag), both ranks leave the
# loop at step 3; the same with a hand-written all_reduce(MAX) of a flag.
# Negative controls: the same loops (the same DDP step every step) with the flag's all-reduce across
# ranks removed, so each rank reads its own flag: check_trigger with its self.reduce made to return the
# flag unchanged, and the same all_reduce(MAX) over a group holding only this rank. Rank 1 would leave
# at step 3; rank 0 would run all 8 steps (steps 0-7, recorded as 8). A rank that really left
# would leave rank 0's next backward waiting for its all-reduce (see the hang page), so the control
# loops run every step on every rank and only record the step at which each rank would have broken.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/failures/early_stop_trigger_all_ranks.py
from unittest import mock

import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

MAX_STEPS, STOP_AT = 8, 3
accelerator = Accelerator()
rank = accelerator.process_index
torch.manual_seed(0)
model = accelerator.prepare(torch.nn.Linear(4, 1))


def wants_to_stop(step):
    return rank == 1 and step == STOP_AT  # only rank 1 sees it


def train_step():
    model(torch.randn(8, 4)).pow(2).mean().backward()  # DDP: an all-reduce every step


def with_trigger():
    for step in range(MAX_STEPS):
        train_step()
        if wants_to_stop(step):
            accelerator.set_trigger()  # sets this rank's flag to 1; no communication yet
        if accelerator.check_trigger():  # every rank: sum-reduce the flags; True if any rank set it
            return step
    return MAX_STEPS


def with_allreduce_flag():
    for step in range(MAX_STEPS):
        train_step()
        flag = torch.tensor([1.0 if wants_to_stop(step) else 0.0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)  # the same idea without Accelerate
        if flag.item() > 0:
            return step
    return MAX_STEPS


def with_trigger_not_reduced():  # control: the same loop, check_trigger with its reduce removed
    stop = MAX_STEPS
    # check_trigger sums the flags with self.reduce; here that returns this rank's flag unchanged.
    with mock.patch.object(Accelerator, "reduce", lambda self, tensor, *args, **kwargs: tensor):
        for step in range(MAX_STEPS):
            train_step()
            if wants_to_stop(step):
                accelerator.set_trigger()
            fired = accelerator.check_trigger()  # this rank's flag only; it resets the flag once it fired
            if fired and stop == MAX_STEPS:
                stop = step  # where this rank would break; it keeps stepping so no all-reduce is left waiting
    return stop


# Every rank creates every one-rank group, in the same order (new_group is collective); each keeps its own.
own_group = [dist.new_group([r]) for r in range(accelerator.num_processes)][rank]


def with_flag_not_reduced():  # control: the same all_reduce-flag loop, the all_reduce over this rank alone
    stop = MAX_STEPS
    for step in range(MAX_STEPS):
        train_step()
        flag = torch.tensor([1.0 if wants_to_stop(step) else 0.0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=own_group)  # no other rank's flag comes in
        if stop == MAX_STEPS and flag.item() > 0:
            stop = step  # where this rank would break; it keeps stepping so no all-reduce is left waiting
    return stop


def stop_steps(loop):
    steps = [None] * accelerator.num_processes
    dist.all_gather_object(steps, loop())
    return steps


trigger_steps = stop_steps(with_trigger)
trigger_after_reset = accelerator.check_trigger()  # check_trigger resets the flag once it fired
flag_steps = stop_steps(with_allreduce_flag)
local_trigger_steps = stop_steps(with_trigger_not_reduced)
local_flag_steps = stop_steps(with_flag_not_reduced)

def stopped_at_the_step(steps):
    return sum(step == STOP_AT for step in steps)  # ranks that left the loop at step 3


_claims.equal(
    "set_trigger_stops_every_rank_at_once",
    measured=stopped_at_the_step(trigger_steps),  # every rank, at the step rank 1 asked for
    control=stopped_at_the_step(local_trigger_steps),
    expected=accelerator.num_processes,
    stop_steps_trigger=trigger_steps,
    stop_steps_trigger_not_reduced=local_trigger_steps,
    check_trigger_after_it_fired=trigger_after_reset,
)
_claims.equal(
    "allreduce_flag_stops_every_rank_at_once",
    measured=stopped_at_the_step(flag_steps),
    control=stopped_at_the_step(local_flag_steps),
    expected=accelerator.num_processes,
    stop_steps_allreduce_flag=flag_steps,
    stop_steps_flag_not_reduced=local_flag_steps,
)
