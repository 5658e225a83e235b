# What a change of world size does to the data of a half-finished epoch. torchrun --nnodes MIN:MAX
# restarts every worker with a new RANK and WORLD_SIZE when a node leaves; the script then resumes from
# its checkpoint. A simulation with torch's real DistributedSampler (shuffle on, seed 0, epoch 0): 24
# samples, 2 per rank per step, 4 ranks take 2 steps (16 samples), then the job restarts on 2 ranks.
#  * Resuming at the same STEP (each rank skips 2 batches of its new shard) repeats some samples and
#    the epoch ends early; the control restarts on 4 ranks, where the same resume is exact.
#  * Resuming at the same number of SAMPLES (each new rank skips consumed / new world size of its shard)
#    repeats none and misses none, because the sampler's permutation does not depend on the world size
#    and its partition is strided; the control is the step-based resume above.
# It runs in every rank of the launch; no rank talks to another (the restart is simulated).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/failures/elastic_resize_resume_position.py
from collections import Counter

from accelerate import Accelerator
from torch.utils.data import DistributedSampler

import _claims

Accelerator()  # only so that the launch is the usual one
SAMPLES, BATCH, STEPS_DONE, OLD_WORLD, NEW_WORLD = 24, 2, 2, 4, 2
dataset = list(range(SAMPLES))


def shard(world, rank):
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=0)
    sampler.set_epoch(0)
    return list(sampler)


def seen_before_restart():
    return [i for rank in range(OLD_WORLD) for i in shard(OLD_WORLD, rank)[: STEPS_DONE * BATCH]]


def seen_after_restart(world, skip_per_rank):
    return [i for rank in range(world) for i in shard(world, rank)[skip_per_rank:]]


def repeated_and_missed(after):
    counts = Counter(seen_before_restart() + after)
    repeated = sum(count - 1 for count in counts.values() if count > 1)
    missed = SAMPLES - len(counts)
    return repeated, missed


consumed = STEPS_DONE * BATCH * OLD_WORLD  # samples the 4 ranks had seen when the node left
by_steps_repeated, by_steps_missed = repeated_and_missed(seen_after_restart(NEW_WORLD, STEPS_DONE * BATCH))
same_world_repeated, same_world_missed = repeated_and_missed(seen_after_restart(OLD_WORLD, STEPS_DONE * BATCH))
by_samples_repeated, by_samples_missed = repeated_and_missed(seen_after_restart(NEW_WORLD, consumed // NEW_WORLD))

_claims.equal(
    "resume_by_steps_repeats_samples",
    measured=by_steps_repeated,
    control=same_world_repeated,
    expected=consumed - STEPS_DONE * BATCH * NEW_WORLD,  # seen before, minus what the skipped batches cover
    missed=by_steps_missed,
    consumed_before_restart=consumed,
    global_batch_before=BATCH * OLD_WORLD,
    global_batch_after=BATCH * NEW_WORLD,
)
_claims.equal(
    "resume_by_samples_repeats_none",
    measured=by_samples_repeated + by_samples_missed,
    control=by_steps_repeated + by_steps_missed,
    expected=0,
    skip_per_rank=consumed // NEW_WORLD,
)
