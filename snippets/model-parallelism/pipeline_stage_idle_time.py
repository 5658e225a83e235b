# Pipeline parallelism costs idle time, not only communication: under torch.distributed.pipelining's
# ScheduleGPipe each of p stages waits while the pipeline fills and drains, idle (p-1)/(m+p-1) of a
# training step with m micro-batches (1/7 = 0.14 for p=2, m=6): the bubble.
# Measured on the clock: every stage's forward sleeps a fixed time per micro-batch and its backward twice
# that (a tiny real Linear besides), each stage sums the time it spent in them, and the idle share is
# 1 - busy / step. Sleeps, not compute, so that two stages on a small shared CPU do not fight for cores;
# load on a shared machine adds waiting (late wake-ups, slow messages), so each stage reports the least
# idle of 3 steps (after a warm-up step without the sleeps).
# Negative control: the same ScheduleGPipe step with 1 micro-batch, where the formula gives 1/2.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/model-parallelism/pipeline_stage_idle_time.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
from accelerate import Accelerator
from torch.distributed.pipelining import ScheduleGPipe

import _claims
import _stage_clock
from _stage_clock import BACKWARD_S, FORWARD_S, formula, idle_share  # the sleeping stage and its clock

accelerator = Accelerator()
stages = accelerator.num_processes

MICRO_BATCHES = 6
gpipe_s, gpipe = idle_share(accelerator, ScheduleGPipe, MICRO_BATCHES)
gpipe_events = list(_stage_clock.last_events)  # this stage's forwards and backwards, for the timeline
control_s, control = idle_share(accelerator, ScheduleGPipe, 1)
control_events = list(_stage_clock.last_events)

_claims.between(
    "pipeline_stage_idles_in_the_bubble",
    measured=gpipe,
    control=control,
    low=0.11,  # formula 0.143, less a little: the sleeps overshoot, and that counts as busy
    high=0.30,  # waiting on send/recv and barriers adds idle time the formula ignores; the control is about 1/2
    stages=stages,
    micro_batches=MICRO_BATCHES,
    formula=formula(stages, MICRO_BATCHES),
    control_micro_batches=1,
    control_formula=formula(stages, 1),
    step_ms=round(gpipe_s * 1000, 1),
    control_step_ms=round(control_s * 1000, 1),
    formula_step_ms=round((MICRO_BATCHES + stages - 1) * (FORWARD_S + BACKWARD_S) * 1000, 1),
    gpipe_events=gpipe_events,
    control_events=control_events,
)
