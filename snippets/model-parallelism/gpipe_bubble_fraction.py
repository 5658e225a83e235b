# What pipeline parallelism costs: the "bubble". In a synchronous GPipe step each of the p stages
# waits while the pipeline fills and drains, idle for a fraction (p-1)/(m+p-1) of the step with m
# micro-batches: 0.2 for p=2, m=4. This snippet measures each stage's idle fraction.
# It measures the SCHEDULE, not FLOPs: every forward sleeps a fixed 30 ms and every backward 60 ms
# (plus a tiny real Linear), so the result does not depend on how loaded the CPU is.
# Negative control: no micro-batching (m=1), where each stage idles half of the step.
#
#   accelerate launch --multi_gpu --num_processes 2 snippets/gpipe_bubble_fraction.py
#   (on a CPU-only machine export ACCELERATE_USE_CPU=true first)
import statistics
import time

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import set_seed

import _claims

FORWARD_S, BACKWARD_S = 0.03, 0.06  # simulated compute per micro-batch; backward ~2x forward as usual
BATCH, WIDTH, STAGES = 8, 16, 2

accelerator = Accelerator()
rank, device = accelerator.process_index, accelerator.device
assert accelerator.num_processes == STAGES, "one pipeline stage per process"
set_seed(0)
layer = torch.nn.Linear(WIDTH, WIDTH).to(device)  # this rank's stage
inputs = torch.randn(BATCH, WIDTH, device=device)


def timed(work, seconds, busy):
    start = time.perf_counter()
    out = work()
    time.sleep(seconds)  # stands in for the stage's real compute on one micro-batch
    busy.append(time.perf_counter() - start)
    return out


def gpipe_step(micro_batches):
    """All forwards then all backwards (GPipe); returns this stage's idle fraction of the step."""
    busy, kept = [], []
    dist.barrier()  # both stages start the step together
    start = time.perf_counter()
    for x in inputs.chunk(micro_batches):
        if rank == 0:
            out = timed(lambda: layer(x), FORWARD_S, busy)
            dist.send(out.detach(), dst=1)
            kept.append(out)
        else:
            received = torch.empty_like(x)
            dist.recv(received, src=0)  # stage 1 waits here while the pipeline fills
            received.requires_grad_()
            kept.append((received, timed(lambda: layer(received).square().mean(), FORWARD_S, busy)))
    for index in reversed(range(micro_batches)):
        if rank == 1:
            received, loss = kept[index]
            timed(loss.backward, BACKWARD_S, busy)
            dist.send(received.grad, dst=0)
        else:
            grad = torch.empty_like(kept[index])
            dist.recv(grad, src=1)  # stage 0 waits here until stage 1 has started draining
            timed(lambda: kept[index].backward(grad), BACKWARD_S, busy)
    dist.barrier()  # the step ends when the LAST stage is done: stage 1 idles until stage 0 finishes
    step = time.perf_counter() - start
    return 1 - sum(busy) / step


def measured_bubble(micro_batches, repeats):
    return statistics.median(gpipe_step(micro_batches) for _ in range(repeats))


def theory(micro_batches):
    return (STAGES - 1) / (micro_batches + STAGES - 1)


gpipe_step(1)  # warm-up: the first send/recv pays gloo's connection setup
bubble_4 = measured_bubble(4, repeats=3)
bubble_1 = measured_bubble(1, repeats=1)

_claims.between(
    "bubble_fraction_matches_gpipe_formula",
    measured=bubble_4,
    control=bubble_1,
    low=round(theory(4) - 0.05, 2),
    high=round(theory(4) + 0.10, 2),  # waiting on send/recv and barriers adds idle time the formula ignores
    stages=STAGES,
    micro_batches=4,
    theory=theory(4),
    control_micro_batches=1,
    control_theory=theory(1),
)
