# Pipeline schedules: GPipe runs every micro-batch's forward before any backward, so stage 0 keeps the
# activations of all m micro-batches alive at once; 1F1B starts backwards as soon as the pipeline is
# full, so stage 0 keeps at most p (the number of stages) alive.
# Measured with torch.distributed.pipelining on 2 stages and 4 micro-batches, counting on stage 0 the
# micro-batches whose forward has run and whose backward has not. Negative control: ScheduleGPipe.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/model-parallelism/pipeline_schedules_memory.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import copy

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

import _claims

MICRO_BATCHES, BATCH, WIDTH = 4, 16, 32
accelerator = Accelerator()
rank, stages = accelerator.process_index, accelerator.num_processes
set_seed(0)
layers = [torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh()) for _ in range(stages)]
inputs, targets = torch.randn(BATCH, WIDTH), torch.randn(BATCH, WIDTH)


def mse(output, target):
    return torch.nn.functional.mse_loss(output, target)


def run(schedule_class):
    """One training step; the most micro-batches whose activations this stage held at once."""
    module = copy.deepcopy(layers[rank])
    in_flight = {"now": 0, "most": 0}

    def forward_done(*_):
        in_flight["now"] += 1
        in_flight["most"] = max(in_flight["most"], in_flight["now"])

    def backward_done(*_):
        in_flight["now"] -= 1

    module.register_forward_hook(forward_done)
    module.register_full_backward_hook(backward_done)
    stage = PipelineStage(module, rank, stages, accelerator.device)
    schedule = schedule_class(stage, n_microbatches=MICRO_BATCHES, loss_fn=mse)
    for step in range(2):  # the first step also runs the stage's shape inference (one extra forward)
        in_flight.update(now=0, most=0)
        if rank == 0:
            schedule.step(inputs)
        elif rank == stages - 1:
            schedule.step(target=targets)
        else:
            schedule.step()
    return in_flight["most"]


gpipe_most = run(ScheduleGPipe)
one_f_one_b_most = run(Schedule1F1B)
if rank == 0:  # the first stage is the one that holds the most
    _claims.at_most(
        "one_f_one_b_holds_at_most_p_micro_batches",
        measured=one_f_one_b_most,
        control=gpipe_most,
        tolerance=stages,
        micro_batches=MICRO_BATCHES,
        stages=stages,
    )
