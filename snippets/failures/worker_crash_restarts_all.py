# One worker of a torchrun job crashes. The elastic agent (the torchrun process) notices, stops the
# OTHER worker too (SIGTERM), and, with --max-restarts 1, starts the whole local worker group again:
# both workers run once more, and each sees TORCHELASTIC_RESTART_COUNT=1. With --max-restarts left at
# its default, 0, the agent stops everything and torchrun fails with ChildFailedError.
# Each rank of this snippet forks one child launcher that calls torch.distributed.run.main (what the
# `torchrun` command runs): rank 0 with --max-restarts 1, rank 1 without the flag, at the same time.
# The job's workers are plain Python (no torch import, so each starts in milliseconds): 3 "steps" in
# lockstep, each ending at a file barrier that stands in for DDP's gradient all-reduce; worker 1
# raises at step 1 of the first attempt only.
# Negative controls: the same job without --max-restarts (nobody runs again; the launcher returns
# normally only when restarts are left); worker 0 in the attempt where nothing crashed (it finishes).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/failures/worker_crash_restarts_all.py
#   By hand, the same job:  torchrun --nproc_per_node 2 --max-restarts 1 job.py OUT 2.0
import gc
import json
import os
import pathlib
import socket
import sys
import tempfile
import time
import traceback

import torch.distributed.run
from accelerate import Accelerator
from accelerate.utils import gather_object

import _claims

state = Accelerator()  # ACCELERATE_USE_CPU=true: gloo on CPU
BARRIER_TIMEOUT_S = 2.0  # a worker left waiting at a barrier this long gives up by itself (exit code 1)

JOB = r"""
import json, os, signal, sys, time
STEPS, CRASHING_WORKER, CRASH_STEP = 3, 1, 1
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
restart = int(os.environ["TORCHELASTIC_RESTART_COUNT"])  # written by the agent for each attempt
folder, BARRIER_TIMEOUT_S, step = sys.argv[1], float(sys.argv[2]), 0

def record(ended):
    with open(os.path.join(folder, f"rank{rank}-restart{restart}.json"), "w") as out:
        json.dump({"rank": rank, "restart_count": restart, "ended": ended, "step": step, "pid": os.getpid(),
                   "max_restarts": os.environ["TORCHELASTIC_MAX_RESTARTS"], "time": time.time()}, out)

def stopped(signum, frame):  # the agent stops workers with SIGTERM
    record(signal.Signals(signum).name)
    os._exit(128 + signum)

signal.signal(signal.SIGTERM, stopped)

def barrier(step):  # a stand-in for a collective: wait until every worker of this attempt is here
    open(os.path.join(folder, f"restart{restart}-step{step}-rank{rank}"), "w").close()
    deadline = time.monotonic() + BARRIER_TIMEOUT_S
    while not all(os.path.exists(os.path.join(folder, f"restart{restart}-step{step}-rank{r}")) for r in range(world)):
        if time.monotonic() > deadline:
            record("barrier timed out")
            sys.exit(1)
        time.sleep(0.005)

for step in range(STEPS):
    if rank == CRASHING_WORKER and restart == 0 and step == CRASH_STEP:
        record("crashed")
        raise RuntimeError(f"worker {rank} crashes at step {step}")
    barrier(step)
record("finished")
"""

# A child launch must not see this launch's rendezvous or the harness's report file.
SCRUB = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK",
         "ROLE_RANK", "ROLE_NAME", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "PROOF_REPORT_FILE")
clean_env = {k: v for k, v in os.environ.items()
             if k not in SCRUB and not k.startswith(("TORCHELASTIC_", "TORCH_NCCL_", "ACCELERATE_"))}
clean_env["OMP_NUM_THREADS"] = "1"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def torchrun(max_restarts, workdir):
    """Fork this rank into `torchrun --nproc_per_node 2 --max-restarts N job.py OUT`; returns what each
    worker recorded and what the launcher raised ("no exception" when it returned normally: a measurement of
    the same kind as the bound, so the judge can compare it)."""
    script, out = pathlib.Path(workdir, "job.py"), pathlib.Path(workdir, "out")
    script.write_text(JOB)
    out.mkdir()
    restarts = [] if max_restarts is None else ["--max-restarts", str(max_restarts)]  # None: torchrun's default
    argv = ["--nproc_per_node", "2", *restarts, "--master_port", str(free_port()),
            str(script), str(out), str(BARRIER_TIMEOUT_S)]
    result, log = pathlib.Path(workdir, "launcher.json"), pathlib.Path(workdir, "launcher.log")
    pid = os.fork()
    if pid == 0:  # the child launcher: the torchrun process, the elastic agent
        outcome = {"raised": "no exception", "failures": {}}
        try:
            gc.disable()  # never free the parent's torch objects (its process group) here
            with open(log, "w") as sink:  # the agent's and its workers' output
                os.dup2(sink.fileno(), 1)
                os.dup2(sink.fileno(), 2)
            sys.stdout = open(1, "w", buffering=1, closefd=False)
            sys.stderr = open(2, "w", buffering=1, closefd=False)
            os.environ.clear()
            os.environ.update(clean_env)
            torch.distributed.run.main(argv)
        except BaseException as error:  # noqa: BLE001  torchrun's failure: ChildFailedError
            outcome = {"raised": type(error).__name__,
                       "failures": {rank: failure.exitcode for rank, failure in getattr(error, "failures", {}).items()}}
            traceback.print_exc()
        finally:
            result.write_text(json.dumps(outcome))
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)  # no atexit, no teardown of the copied harness state
    started = time.perf_counter()
    os.waitpid(pid, 0)
    outcome = json.loads(result.read_text())
    outcome["seconds"] = round(time.perf_counter() - started, 3)
    outcome["workers"] = [json.loads(p.read_text()) for p in sorted(out.glob("rank*.json"))]
    return outcome


with tempfile.TemporaryDirectory() as workdir:
    # rank 0: --max-restarts 1; rank 1: the control, --max-restarts left out so that torchrun's default (0) decides
    mine = torchrun(max_restarts=1 if state.process_index == 0 else None, workdir=workdir)
launches = gather_object([mine])
with_restart, without_restart = launches[0], launches[1]


def finished_restart_counts(launch):
    """TORCHELASTIC_RESTART_COUNT of each worker that finished its steps, as the worker read it."""
    return sorted(w["restart_count"] for w in launch["workers"] if w["ended"] == "finished")


def worker(launch, rank, restart):
    return next((w for w in launch["workers"] if w["rank"] == rank and w["restart_count"] == restart), {})


def ended(launch, rank, restart):
    return worker(launch, rank, restart).get("ended")


def seconds_from_crash_to_sigterm(launch):
    """From worker 1's last record before it raised to worker 0's record in its SIGTERM handler."""
    crashed, stopped = worker(launch, rank=1, restart=0), worker(launch, rank=0, restart=0)
    return round(stopped["time"] - crashed["time"], 3) if "time" in crashed and "time" in stopped else None


if state.is_main_process:
    workers = {launch: [(w["rank"], w["restart_count"], w["ended"], w["step"], w["pid"]) for w in outcome["workers"]]
               for launch, outcome in (("max_restarts_1", with_restart), ("max_restarts_0", without_restart))}
    _claims.equal(
        "one_crash_restarts_every_worker",
        measured=finished_restart_counts(with_restart),
        control=finished_restart_counts(without_restart),
        expected=[1, 1],
        workers_rank_restart_ended_step_pid=workers,
        launcher_seconds=[with_restart["seconds"], without_restart["seconds"]],
    )
    _claims.equal(
        "healthy_worker_is_stopped_by_the_agent",
        measured=ended(with_restart, rank=0, restart=0),  # worker 0 never failed
        control=ended(with_restart, rank=0, restart=1),  # worker 0 again, in the attempt where nobody crashed
        expected="SIGTERM",
        worker_0_step_when_stopped=worker(with_restart, rank=0, restart=0).get("step"),
        seconds_from_crash_to_sigterm=seconds_from_crash_to_sigterm(with_restart),
        barrier_timeout_seconds=BARRIER_TIMEOUT_S,  # how long worker 0 would wait before ending by itself
        worker_0_without_restarts=ended(without_restart, rank=0, restart=0),
    )
    _claims.equal(
        "job_fails_once_restarts_are_spent",
        measured=without_restart["raised"],
        control=with_restart["raised"],
        expected="ChildFailedError",
        failures_exit_codes=without_restart["failures"],  # by global rank
        # what the agent told its workers when --max-restarts was left out (TORCHELASTIC_MAX_RESTARTS)
        max_restarts_seen_by_default=sorted({w["max_restarts"] for w in without_restart["workers"]}),
    )
