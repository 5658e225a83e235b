# notebook_launcher from a "notebook": what each started process sees, in three cases.
#   1. notebook_launcher(train, num_processes=2) on a machine without GPUs: it prints "Launching
#      training on 2 CUDAs" and starts 2 processes, but each one's Accelerator() finds no GPU and no CPU
#      flag, so it runs alone (DistributedType.NO, 1 process): two copies of single-process training.
#   2. the same with ACCELERATE_USE_CPU=true in the environment: one world of 2 processes on gloo.
#   3. an Accelerator already created in the notebook's process: notebook_launcher refuses to start.
# A Jupyter kernel is a process with torch and accelerate imported and no process group. Rank 0 of this
# launch plays one per case (snippets/_notebook_kernel.py: a forked child that forgets the launch it came
# from), which calls notebook_launcher, which forks the workers. Each kernel has a hard deadline.
# Negative controls: each case is the control of the other (the environment variable is the mechanism);
# for 3, the same call without the Accelerator created first.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/notebooks/notebook_launcher_cpu_trap.py
import contextlib
import io
import json
import os
import pathlib

import torch.distributed as dist
from accelerate import Accelerator, notebook_launcher

import _claims
from _notebook_kernel import free_port, run_cell

HARD_DEADLINE_S = 90

accelerator = Accelerator()


def train(results_dir):
    """The notebook's training function: every process reports the world it sees."""
    import torch

    acc = Accelerator()  # created INSIDE the function, as notebook_launcher requires
    total = torch.tensor([float(acc.process_index + 1)])  # a sum over the processes Accelerate numbered
    if dist.is_initialized():
        dist.all_reduce(total)
    report = {"type": str(acc.distributed_type).split(".")[-1], "num_processes": acc.num_processes,
              "process_index": acc.process_index, "torch_rank": dist.get_rank() if dist.is_initialized() else None,
              "backend": dist.get_backend() if dist.is_initialized() else None,
              "torch_world": dist.get_world_size() if dist.is_initialized() else None,
              "local_rank_env": os.environ.get("LOCAL_RANK"), "sum": total.item()}  # fmt: skip
    path = pathlib.Path(results_dir, f"{os.getpid()}.json")
    path.write_text(json.dumps(report))


def notebook_cell(case):
    """The cell notebook_launcher(train, num_processes=2), run in a fresh kernel; returns what it printed
    and the error it raised."""

    def cell(results_dir):
        if case == "use_cpu":
            os.environ["ACCELERATE_USE_CPU"] = "true"  # <- the one line that makes it work on CPU
        printed, error = io.StringIO(), None
        try:
            if case == "accelerator_first":
                Accelerator()  # a cell that created an Accelerator before the launch
            with contextlib.redirect_stdout(printed):
                notebook_launcher(train, args=(results_dir,), num_processes=2, use_port=free_port())
        except BaseException as raised:  # noqa: BLE001
            error = f"{type(raised).__name__}: {raised}"
        return printed.getvalue(), error

    return cell


def run_case(case):
    answer, workers, seconds = run_cell(notebook_cell(case), HARD_DEADLINE_S)
    printed, error = answer if isinstance(answer, tuple) else ("", answer)  # a string: the kernel never answered
    return {"printed": printed.strip(), "error": error, "workers": workers, "seconds": seconds}


if accelerator.is_main_process:
    cases = {case: run_case(case) for case in ("plain", "use_cpu", "accelerator_first")}

    def world(case):
        """Per process: what Accelerate believes (type, number of processes) and torch's world size."""
        return sorted([w["type"], w["num_processes"], w["torch_world"]] for w in cases[case]["workers"])

    def seen(case):
        """What the sentences name: the worlds, torch's backends, Accelerate's process indices, the all-reduce."""
        workers = cases[case]["workers"]
        return [world(case), sorted(str(w["backend"]) for w in workers),
                sorted(w["process_index"] for w in workers), sorted(w["sum"] for w in workers)]

    _claims.equal(
        "plain_launch_gives_two_lone_processes",
        measured=seen("plain") + [cases["plain"]["printed"]],
        control=seen("use_cpu") + [cases["use_cpu"]["printed"]],
        # torch has a group of 2 (no backend); Accelerate sees 1 process, index 0 in both; 1 + 1 = 2
        expected=[[["NO", 1, 2], ["NO", 1, 2]], ["undefined", "undefined"], [0, 0], [2.0, 2.0],
                  "Launching training on 2 CUDAs."],
        backends=[w["backend"] for w in cases["plain"]["workers"]],
        printed=cases["plain"]["printed"],
        sums=[w["sum"] for w in cases["plain"]["workers"]],
        process_index_and_torch_rank=sorted([w["process_index"], w["torch_rank"]] for w in cases["plain"]["workers"]),
        seconds=cases["plain"]["seconds"],
    )
    _claims.equal(
        "use_cpu_gives_one_gloo_world_of_two",
        measured=seen("use_cpu"),
        control=seen("plain"),
        # one world of 2 on gloo, indices 0 and 1; the all-reduce of 1 and 2 gives 3 on both
        expected=[[["MULTI_CPU", 2, 2], ["MULTI_CPU", 2, 2]], ["gloo", "gloo"], [0, 1], [3.0, 3.0]],
        backends=[w["backend"] for w in cases["use_cpu"]["workers"]],
        printed=cases["use_cpu"]["printed"],
        sums=[w["sum"] for w in cases["use_cpu"]["workers"]],
        seconds=cases["use_cpu"]["seconds"],
    )
    refused = lambda case: "should only be initialized inside your training function" in (cases[case]["error"] or "")  # noqa: E731
    _claims.equal(
        "refuses_when_an_accelerator_exists",
        measured=refused("accelerator_first"),
        control=refused("use_cpu"),  # the same call with no Accelerator created first
        expected=True,
        error=cases["accelerator_first"]["error"],
        workers_started=len(cases["accelerator_first"]["workers"]),
    )
accelerator.wait_for_everyone()
