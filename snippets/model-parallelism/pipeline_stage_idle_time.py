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
import time

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

import _claims

FORWARD_S, BACKWARD_S = 0.012, 0.024  # simulated compute of one stage on ONE micro-batch
MICRO_BATCH, WIDTH = 4, 8

accelerator = Accelerator()
rank, stages = accelerator.process_index, accelerator.num_processes
busy = []  # seconds this stage spent computing in the current step
simulate = [True]  # False during the warm-up step: it only has to run the shape inference


def compute(seconds):
    if simulate[0]:
        time.sleep(seconds)


class Sleep(torch.autograd.Function):
    """Identity whose backward takes BACKWARD_S: the stage's backward compute."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        start = time.perf_counter()
        compute(BACKWARD_S)
        busy.append(time.perf_counter() - start)
        return grad


class Stage(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        start = time.perf_counter()
        out = Sleep.apply(self.linear(x))
        compute(FORWARD_S)
        busy.append(time.perf_counter() - start)
        return out


def mse(output, target):
    return torch.nn.functional.mse_loss(output, target)


def idle_share(schedule_class, micro_batches, repeats=3):
    """This stage's least idle share in `repeats` steps (after one warm-up step), and the fastest step."""
    set_seed(0)
    stage = PipelineStage(Stage(), rank, stages, accelerator.device)
    schedule = schedule_class(stage, n_microbatches=micro_batches, loss_fn=mse)
    inputs = torch.randn(micro_batches * MICRO_BATCH, WIDTH)
    targets = torch.randn(micro_batches * MICRO_BATCH, WIDTH)
    runs = []
    for step in range(repeats + 1):  # the first step also runs the stage's shape inference
        simulate[0] = step > 0  # the warm-up step skips the sleeps: it is not measured
        busy.clear()
        dist.barrier()  # both stages start the step together
        start = time.perf_counter()
        if rank == 0:
            schedule.step(inputs)
        elif rank == stages - 1:
            schedule.step(target=targets)
        else:
            schedule.step()
        dist.barrier()  # the step ends when the last stage is done
        step_s = time.perf_counter() - start
        if step:
            runs.append((step_s, 1 - sum(busy) / step_s))
    return min(step_s for step_s, _ in runs), min(idle for _, idle in runs)


def formula(micro_batches):
    return (stages - 1) / (micro_batches + stages - 1)


MICRO_BATCHES = 6
gpipe_s, gpipe = idle_share(ScheduleGPipe, MICRO_BATCHES)
control_s, control = idle_share(ScheduleGPipe, 1)

_claims.between(
    "pipeline_stage_idles_in_the_bubble",
    measured=gpipe,
    control=control,
    low=0.11,  # formula 0.143, less a little: the sleeps overshoot, and that counts as busy
    high=0.30,  # waiting on send/recv and barriers adds idle time the formula ignores; the control is about 1/2
    stages=stages,
    micro_batches=MICRO_BATCHES,
    formula=formula(MICRO_BATCHES),
    control_micro_batches=1,
    control_formula=formula(1),
    step_ms=round(gpipe_s * 1000, 1),
    control_step_ms=round(control_s * 1000, 1),
    formula_step_ms=round((MICRO_BATCHES + stages - 1) * (FORWARD_S + BACKWARD_S) * 1000, 1),
)
