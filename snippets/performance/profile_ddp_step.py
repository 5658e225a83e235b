# Profiling a distributed step with Accelerate: accelerator.profile() wraps torch.profiler, and with
# ProfileKwargs(output_trace_dir=...) each rank writes its own Chrome trace. In a DDP step the trace
# shows the gradient all-reduce (gloo:all_reduce on CPU). Negative control: the same step inside
# no_sync(), where DDP skips the all-reduce.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/performance/profile_ddp_step.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import json
import os
import tempfile

import torch
from accelerate import Accelerator
from accelerate.utils import ProfileKwargs, set_seed

import _claims

accelerator = Accelerator()
set_seed(0)
model = accelerator.prepare(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)))
x = torch.randn(16, 64, device=accelerator.device)
trace_root = tempfile.mkdtemp(prefix="profile-")  # each rank's own folder: no shared files needed


def all_reduces_in_trace(synchronise):
    """Profile one forward+backward; count the all-reduce events in this rank's exported Chrome trace."""
    folder = os.path.join(trace_root, "ddp" if synchronise else "no_sync")
    handler = ProfileKwargs(output_trace_dir=folder)
    with accelerator.profile(handler):
        if synchronise:
            accelerator.backward(model(x).pow(2).mean())
        else:
            with accelerator.no_sync(model):
                accelerator.backward(model(x).pow(2).mean())
    (trace_file,) = os.listdir(folder)
    with open(os.path.join(folder, trace_file)) as trace:
        events = json.load(trace)["traceEvents"]
    return sum("all_reduce" in event.get("name", "") for event in events), trace_file


in_ddp_step, trace_name = all_reduces_in_trace(synchronise=True)
in_no_sync_step, _ = all_reduces_in_trace(synchronise=False)
_claims.at_least(
    "trace_shows_the_gradient_all_reduce",
    measured=in_ddp_step,
    control=in_no_sync_step,
    bound=1,
    trace_file=trace_name,
)
