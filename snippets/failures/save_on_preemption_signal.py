# Saving a checkpoint on every rank before a preemption. The scheduler's SIGTERM reaches rank 1 only,
# at the end of step 3, the 4th (the snippet sends it to itself with os.kill, so the step is known). A handler only
# sets a flag; every step all ranks all_reduce(MAX) the flag, so all of them see it at the same step,
# call accelerator.save_state together and stop. save_state writes the weights and optimizer from the
# main process and each rank's random states from that rank: the checkpoint is complete, one step.
# Negative control: the same loop where each rank acts on its own flag only. Rank 1 saves alone;
# rank 0 never learns of the signal, so the checkpoint has no weights and no rank-0 state. (Its steps
# run under no_sync: with DDP's all-reduce, rank 0 would block at its next backward, waiting for rank 1,
# until the process-group timeout.)
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/failures/save_on_preemption_signal.py
import contextlib
import os
import pathlib
import shutil
import signal
import tempfile

import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

MAX_STEPS, SIGNALLED_RANK, SIGNAL_STEP = 8, 1, 3
accelerator = Accelerator()
rank = accelerator.process_index
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = accelerator.prepare(model, optimizer)

preempted = False


def on_sigterm(signum, frame):  # do nothing heavy in a handler: note it, act at the end of the step
    global preempted
    preempted = True


def train(checkpoint, agree):
    """Up to MAX_STEPS DDP steps; saves a checkpoint and stops when preemption is noticed."""
    global preempted
    preempted = False
    accelerator.step = 0  # the counter accumulate() advances and save_state records; both runs start at 0
    for step in range(MAX_STEPS):
        with accelerator.accumulate(model), (contextlib.nullcontext() if agree else accelerator.no_sync(model)):
            accelerator.backward(model(torch.randn(8, 4)).pow(2).mean())  # accumulate() counts accelerator.step
            optimizer.step()
            optimizer.zero_grad()
        if rank == SIGNALLED_RANK and step == SIGNAL_STEP:
            os.kill(os.getpid(), signal.SIGTERM)  # the scheduler's notice, to this rank only
        if agree:
            flag = torch.tensor([1.0 if preempted else 0.0])
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)  # any rank preempted -> every rank sees 1
            stop = flag.item() > 0
        else:
            stop = preempted  # the control: each rank acts on its own signal only
        if stop:
            accelerator.save_state(checkpoint)  # model + optimizer from rank 0, random states from every rank
            return step
    return None


def saved(checkpoint):
    """What the checkpoint folder holds, and the step each rank's random_states_<rank>.pkl recorded."""
    folder = pathlib.Path(checkpoint)
    files = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    steps = [torch.load(folder / f"random_states_{r}.pkl", weights_only=False)["step"]
             if (folder / f"random_states_{r}.pkl").exists() else None for r in range(accelerator.num_processes)]
    return files, steps


workdir = [tempfile.mkdtemp() if accelerator.is_main_process else None]
dist.broadcast_object_list(workdir)  # one folder for both ranks
previous_handler = signal.signal(signal.SIGTERM, on_sigterm)
try:
    agreed = os.path.join(workdir[0], "agreed")
    alone = os.path.join(workdir[0], "each_rank_alone")
    stop_agreed = train(agreed, agree=True)
    accelerator.wait_for_everyone()
    stop_alone = train(alone, agree=False)
    accelerator.wait_for_everyone()  # the saves of both ranks are on disk
    (files_agreed, steps_agreed), (files_alone, steps_alone) = saved(agreed), saved(alone)
finally:
    signal.signal(signal.SIGTERM, previous_handler)
stop_steps = [None] * accelerator.num_processes
dist.all_gather_object(stop_steps, [stop_agreed, stop_alone])
accelerator.wait_for_everyone()
if accelerator.is_main_process:
    shutil.rmtree(workdir[0])

if accelerator.is_main_process:
    _claims.equal(
        "every_rank_saves_at_the_same_step",
        measured=steps_agreed,  # accelerator.step in each rank's random_states_<rank>.pkl
        control=steps_alone,
        expected=[SIGNAL_STEP + 1] * accelerator.num_processes,  # 4 steps trained when the signal came
        loop_step_of_save_per_rank_agreed_alone=stop_steps,
    )
    _claims.equal(
        "checkpoint_has_weights_and_every_ranks_state",
        measured=files_agreed,
        control=files_alone,
        expected=["model.safetensors", "optimizer.bin"]
        + [f"random_states_{r}.pkl" for r in range(accelerator.num_processes)],
    )
