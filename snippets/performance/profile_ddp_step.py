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
    names = sorted({event.get("name", "") for event in events if "allreduce" in event.get("name", "").replace("_", "")})
    return sum("all_reduce" in event.get("name", "") for event in events), trace_file, names


def scheduled(on_trace_ready, output_trace_dir=None):
    """8 labelled DDP steps under ProfileKwargs(schedule_option=wait 1, warmup 1, active 2, repeat 1), prof.step()
    after each (the follow-up on the page): which steps and all-reduces the exported traces hold, or the error."""
    handler = ProfileKwargs(schedule_option=dict(wait=1, warmup=1, active=2, repeat=1), on_trace_ready=on_trace_ready,
                            output_trace_dir=output_trace_dir)
    try:
        with accelerator.profile(handler) as prof:
            for i in range(8):
                with torch.profiler.record_function(f"mystep{i}"):
                    accelerator.backward(model(x).pow(2).mean())
                prof.step()
    except RuntimeError as error:
        return f"RuntimeError: {error}"
    return None


def read_trace(path):
    with open(path) as trace:
        events = json.load(trace)["traceEvents"]
    return {
        "steps": sorted({e["name"] for e in events if e.get("name", "").startswith("mystep")}),
        "all_reduces": sum("all_reduce" in e.get("name", "") for e in events),
    }


handler_calls = []


def export_per_rank(prof):  # the handler of the page's follow-up
    path = os.path.join(trace_root, f"cycle_{accelerator.process_index}_{prof.step_num}.json")
    prof.export_chrome_trace(path)
    handler_calls.append((prof.step_num, path))


in_ddp_step, trace_name, names = all_reduces_in_trace(synchronise=True)
in_no_sync_step, _, no_sync_names = all_reduces_in_trace(synchronise=False)
# then the follow-up's schedule, after the measured step (the first DDP iteration, one bucket, see the page)
scheduled(export_per_rank)
schedule_handler = [{"step_num": step, **read_trace(path)} for step, path in handler_calls]
with_dir = os.path.join(trace_root, "scheduled")
scheduled(lambda prof: None, output_trace_dir=with_dir)  # a handler that does not export, plus output_trace_dir
schedule_output_trace_dir = read_trace(os.path.join(with_dir, f"profile_{accelerator.process_index}.json"))
schedule_both_exports = scheduled(export_per_rank, output_trace_dir=os.path.join(trace_root, "both"))

_claims.at_least(
    "trace_shows_the_gradient_all_reduce",
    measured=in_ddp_step,
    control=in_no_sync_step,
    bound=1,
    trace_file=trace_name,
    all_reduce_event_names=names,  # every event name with "allreduce" in it, underscores ignored
    no_sync_all_reduce_event_names=no_sync_names,
    schedule_handler_calls=schedule_handler,  # the follow-up's schedule: step_num, steps and all-reduces per call
    schedule_output_trace_dir=schedule_output_trace_dir,
    schedule_handler_and_output_trace_dir=schedule_both_exports,
)
