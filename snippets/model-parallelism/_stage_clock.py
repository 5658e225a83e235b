"""The clock both bubble proofs read: a pipeline stage whose compute is a sleep, and its idle share of a step.

Every stage's forward sleeps FORWARD_S per micro-batch and its backward twice that (a tiny real Linear
besides); each stage sums the time it spent in them, and the idle share is 1 - busy / step. Sleeps, not
compute, so that two stages on a small shared CPU do not fight for cores; load on a shared machine adds
waiting (late wake-ups, slow messages), so each stage reports the least idle of 3 steps (after a warm-up
step without the sleeps). Used by one_f_one_b_bubble.py and pipeline_stage_idle_time.py. The busy spans
of the least idle step are kept in `last_events` (["F" or "B", micro-batch, start ms, end ms] from the
step's start), for the page's timeline of the schedule.
"""

import time

import torch
import torch.distributed as dist
from accelerate.utils import set_seed
from torch.distributed.pipelining import PipelineStage

FORWARD_S, BACKWARD_S = 0.012, 0.024  # simulated compute of one stage on ONE micro-batch
MICRO_BATCH, WIDTH = 4, 8

busy = []  # (kind, start, end) on the perf_counter clock: this stage's compute in the current step
last_events = []  # the least idle step's busy spans, set by idle_share
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
        busy.append(("B", start, time.perf_counter()))
        return grad


class Stage(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        start = time.perf_counter()
        out = Sleep.apply(self.linear(x))
        compute(FORWARD_S)
        busy.append(("F", start, time.perf_counter()))
        return out


def mse(output, target):
    return torch.nn.functional.mse_loss(output, target)


def idle_share(accelerator, schedule_class, micro_batches, repeats=3):
    """This stage's least idle share in `repeats` steps (after one warm-up step), and the fastest step."""
    rank, stages = accelerator.process_index, accelerator.num_processes
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
            runs.append((step_s, 1 - sum(end - begin for _, begin, end in busy) / step_s, spans(busy, start)))
    last_events[:] = min(runs, key=lambda run: run[1])[2]
    return min(step_s for step_s, _, _ in runs), min(idle for _, idle, _ in runs)


def spans(busy, step_start):
    """[kind, micro-batch, start ms, end ms]: micro-batches numbered in the order each kind ran them."""
    counts = {}
    found = []
    for kind, begin, end in busy:
        counts[kind] = counts.get(kind, -1) + 1
        found.append([kind, str(counts[kind]), round((begin - step_start) * 1000, 1), round((end - step_start) * 1000, 1)])
    return found


def formula(stages, micro_batches):
    """GPipe's bubble, (p-1)/(m+p-1) of the step for p stages and m micro-batches."""
    return (stages - 1) / (micro_batches + stages - 1)
