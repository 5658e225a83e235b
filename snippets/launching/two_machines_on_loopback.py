# A 2-machine launch, played on one host over loopback: two `accelerate launch` commands, one per
# "machine", each told the job has 2 machines, its own --machine_rank, and the address and port of
# machine 0 (the rendezvous). Each machine starts 1 process (--num_processes is the TOTAL: 2 over 2
# machines). Both processes join ONE world of 2 and all-reduce across the "machines".
# Rank 0 of this snippet's own launch starts the two child launches at once and waits for both; every
# child is killed in `finally`, whatever happens. Each child launcher is a fork of rank 0 that runs what the
# `accelerate launch` command runs (accelerate's launch_command on the command line's arguments) in a
# cleaned environment: the fork has torch and accelerate imported already, so only the job's 2 processes
# are fresh interpreters (a launch per machine is the point of the proof; their imports are most of its time).
# Negative controls: each process's value before the all-reduce; the same variables in this snippet's
# own single-machine ranks; this launch's own MASTER_PORT.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/launching/two_machines_on_loopback.py
#   By hand on two real machines (IP of machine 0 = 10.0.0.1), with --multi_gpu and 8 GPUs each:
#     machine 0: accelerate launch --multi_gpu --num_machines 2 --num_processes 16 --machine_rank 0 \
#                --main_process_ip 10.0.0.1 --main_process_port 29500 train.py
#     machine 1: the same with --machine_rank 1
import contextlib
import gc
import json
import os
import pathlib
import signal
import socket
import sys
import tempfile
import time
import traceback

import torch
from accelerate import Accelerator
from accelerate.commands.launch import launch_command, launch_command_parser
from accelerate.utils import gather_object

import _claims

LAUNCH_TIMEOUT_S = 150
VARIABLES = ("RANK", "LOCAL_RANK", "GROUP_RANK", "NODE_RANK")

accelerator = Accelerator()

# What each process of the 2-machine job runs: report the environment, all-reduce across machines.
CHILD = """
import json, os, sys, torch, torch.distributed as dist
from accelerate import Accelerator
accelerator = Accelerator()  # ACCELERATE_USE_CPU=true: gloo
mine = torch.tensor([float(accelerator.process_index + 1)])
before = mine.item()
dist.all_reduce(mine)  # across both machines
names = ("RANK", "LOCAL_RANK", "GROUP_RANK", "NODE_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
report = {"env": {k: os.environ.get(k) for k in names}, "world": accelerator.num_processes,
          "type": str(accelerator.distributed_type).split(".")[-1], "backend": dist.get_backend(),
          "before": before, "after": mine.item()}
with open(os.path.join(sys.argv[1], f"rank{accelerator.process_index}.json"), "w") as out:
    json.dump(report, out)
accelerator.wait_for_everyone()
os._exit(0)  # skip torch's C++ teardown, which sometimes aborts at exit on CPU; the report is written
"""

SCRUB = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK",
         "ROLE_RANK", "ROLE_NAME", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "PROOF_REPORT_FILE")


def clean_env():
    """A child launch must not see this launch's rendezvous or the harness's report file."""
    env = {k: v for k, v in os.environ.items() if k not in SCRUB and not k.startswith(("TORCHELASTIC_", "ACCELERATE_"))}
    env.update(ACCELERATE_USE_CPU="true", OMP_NUM_THREADS="1")
    return env


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_machine(argv, log):
    """Fork rank 0 into a child launcher that runs `accelerate launch ARGV` (accelerate/commands/launch.py,
    main) with its output in `log`; returns the fork's pid."""
    pid = os.fork()
    if pid == 0:  # the child launcher
        code = 1
        try:
            os.setsid()  # its own session: the launcher and the process it starts are killed together
            gc.disable()  # never free the parent's torch objects (its process group) here
            with open(log, "w") as sink:
                os.dup2(sink.fileno(), 1)
                os.dup2(sink.fileno(), 2)
            sys.stdout = open(1, "w", buffering=1, closefd=False)  # not the harness's log of rank 0
            sys.stderr = open(2, "w", buffering=1, closefd=False)
            os.environ.clear()
            os.environ.update(clean_env())
            sys.argv = ["accelerate launch", *argv]
            launch_command(launch_command_parser().parse_args(argv))
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        except BaseException:  # noqa: BLE001  report it in the log, then leave
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)  # no atexit, no teardown of the copied harness state
    return pid


def wait_machine(pid, deadline):
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    return f"still running after {LAUNCH_TIMEOUT_S} s"


ours = gather_object([[os.environ.get(name) for name in VARIABLES] + [os.environ.get("MASTER_PORT")]])

reports, port = None, free_port()
if accelerator.is_main_process:
    with tempfile.TemporaryDirectory() as workdir:
        script = pathlib.Path(workdir, "job.py")
        script.write_text(CHILD)
        machines = {}  # machine rank -> pid of its launcher
        try:
            for machine_rank in (0, 1):
                argv = [
                    "--multi_gpu",
                    "--num_machines", "2", "--machine_rank", str(machine_rank),  # <- this machine's rank
                    "--main_process_ip", "127.0.0.1", "--main_process_port", str(port),  # <- machine 0's address
                    "--num_processes", "2",  # <- the TOTAL over both machines
                    "--mixed_precision", "no", "--dynamo_backend", "no", str(script), workdir,
                ]  # fmt: skip
                machines[machine_rank] = start_machine(argv, pathlib.Path(workdir, f"machine{machine_rank}.log"))
            deadline = time.monotonic() + LAUNCH_TIMEOUT_S
            for machine_rank, pid in list(machines.items()):
                code = wait_machine(pid, deadline)
                if code != 0:
                    log = pathlib.Path(workdir, f"machine{machine_rank}.log").read_text()
                    raise RuntimeError(f"machine {machine_rank} failed ({code}):\n{log[-3000:]}")
                del machines[machine_rank]  # reaped
            reports = [json.loads(pathlib.Path(workdir, f"rank{r}.json").read_text()) for r in (0, 1)]
        finally:
            for pid in machines.values():  # still running: the launcher and its process share a session
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
accelerator.wait_for_everyone()  # rank 1 waits here while rank 0's child launches run

if accelerator.is_main_process:
    _claims.equal(
        "one_world_across_two_machines",
        measured=[[r["world"], r["after"]] for r in reports],
        control=[[r["world"], r["before"]] for r in reports],  # each process's value before the all-reduce
        expected=[[2, 3.0], [2, 3.0]],
        distributed_type=[r["type"] for r in reports],
        backend=[r["backend"] for r in reports],
    )
    as_ints = lambda row: [None if v is None else int(v) for v in row]  # noqa: E731
    _claims.equal(
        "rank_local_rank_group_rank_node_rank",
        measured=[as_ints([r["env"][name] for name in VARIABLES]) for r in reports],
        control=[as_ints(row[: len(VARIABLES)]) for row in ours],  # this launch: 1 machine x 2 processes
        expected=[[0, 0, 0, None], [1, 0, 1, None]],
        world_and_local_world=[[r["env"]["WORLD_SIZE"], r["env"]["LOCAL_WORLD_SIZE"]] for r in reports],
    )
    _claims.equal(
        "both_machines_meet_at_machine_0",
        measured=[[r["env"]["MASTER_ADDR"], r["env"]["MASTER_PORT"]] for r in reports],
        control=[["127.0.0.1", row[-1]] for row in ours],  # this launch's own rendezvous port
        expected=[["127.0.0.1", str(port)]] * 2,
    )
