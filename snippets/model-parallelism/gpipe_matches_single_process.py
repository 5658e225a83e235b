# Pipeline parallelism with a synchronous (GPipe) schedule is not "biased": stage 0 of the model
# on rank 0, stage 1 on rank 1, the batch cut into 4 micro-batches that flow through with
# dist.send/recv, gradients accumulated over all micro-batches before the optimizer step. The
# gradients equal those of one process running the whole model on the whole batch, up to rounding.
# Negative controls: keep only one micro-batch's gradient (no accumulation, as if each
# micro-batch stepped on its own), or never send the activation gradient back to stage 0.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/model-parallelism/gpipe_matches_single_process.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import set_seed

import _claims

TOLERANCE = 1e-6  # float32 sums in another order differ by ~1e-8; a wrong schedule by ~1e-1
BATCH, MICRO_BATCHES, IN, HIDDEN = 16, 4, 8, 32

accelerator = Accelerator()
rank, device = accelerator.process_index, accelerator.device
assert accelerator.num_processes == 2, "this pipeline has exactly 2 stages"
set_seed(0)  # same weights and same batch on both ranks, so each can build the reference

stages = [
    torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.Tanh()),  # stage 0 -> rank 0
    torch.nn.Sequential(torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, 1)),  # rank 1
]
stages = [stage.to(device) for stage in stages]
inputs = torch.randn(BATCH, IN, device=device)
targets = torch.randn(BATCH, 1, device=device)

# Reference: one process, the whole model, the whole batch, loss = mean over all 16 samples.
for stage in stages:
    stage.zero_grad()
torch.nn.functional.mse_loss(stages[1](stages[0](inputs)), targets).backward()
reference = torch.cat([p.grad.flatten() for p in stages[rank].parameters()]).clone()

my_stage = stages[rank]  # each rank keeps (and would update) only its own stage's parameters


def gpipe_step(keep_one_micro_batch_only=False, send_grad_back=True):
    """One GPipe step: all forwards, then all backwards; returns this stage's gradient."""
    my_stage.zero_grad()
    x_chunks, y_chunks = inputs.chunk(MICRO_BATCHES), targets.chunk(MICRO_BATCHES)
    kept = []  # what each micro-batch's backward needs: GPipe keeps these activations in memory
    for x, y in zip(x_chunks, y_chunks):  # forward phase
        if rank == 0:
            activation = my_stage(x)
            dist.send(activation.detach(), dst=1)
            kept.append(activation)
        else:
            received = torch.empty(x.shape[0], HIDDEN, device=device)
            dist.recv(received, src=0)
            received.requires_grad_()
            # each micro-batch's loss is its mean / m, so the sum over micro-batches is the batch mean
            loss = torch.nn.functional.mse_loss(my_stage(received), y) / MICRO_BATCHES
            kept.append((received, loss))
    for index in reversed(range(MICRO_BATCHES)):  # backward phase
        if keep_one_micro_batch_only:
            my_stage.zero_grad()  # the control forgets the other micro-batches' gradients
        if rank == 1:
            received, loss = kept[index]
            loss.backward()  # parameter gradients ACCUMULATE in .grad across micro-batches
            dist.send(received.grad if send_grad_back else torch.zeros_like(received.grad), dst=0)
        else:
            grad = torch.empty_like(kept[index])
            dist.recv(grad, src=1)
            kept[index].backward(grad)  # continue the chain rule from where stage 1 stopped
    return torch.cat([p.grad.flatten() for p in my_stage.parameters()])


def worst_error_over_stages(gradient):
    error = (gradient - reference).abs().max().reshape(1)
    dist.all_reduce(error, op=dist.ReduceOp.MAX)  # both ranks report the error of the whole model
    return error.item()


pipelined = worst_error_over_stages(gpipe_step())
one_micro_batch_only = worst_error_over_stages(gpipe_step(keep_one_micro_batch_only=True))
no_grad_sent_back = worst_error_over_stages(gpipe_step(send_grad_back=False))

_claims.at_most(
    "gpipe_gradients_match_full_batch",
    measured=pipelined,
    control=one_micro_batch_only,
    tolerance=TOLERANCE,
    micro_batches=MICRO_BATCHES,
    micro_batch_size=BATCH // MICRO_BATCHES,
    stage_parameters=sum(p.numel() for p in my_stage.parameters()),
    error_without_grad_sent_back=no_grad_sent_back,
)
