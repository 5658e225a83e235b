# `accelerate launch` and torchrun start the same kind of workers: one training function with a plain
# Accelerator() ends with the same weights under both. This snippet's own 2 ranks were started by
# `accelerate launch --multi_gpu --num_processes 2` and run the function here; rank 0 also writes it
# into a script and runs that as two child launches at once: `torchrun --nproc_per_node 2` (what the
# deprecated `python -m torch.distributed.launch --use_env` became) and
# `accelerate launch --cpu --num_processes 2`, which starts ONE process.
# Each child launcher is a fork of rank 0 that calls the launcher's own entry point with the command
# line's arguments (torch.distributed.run.main, which `torchrun` runs; accelerate's launch_command, which
# `accelerate launch` runs), in a cleaned environment: the fork has torch imported already, so only the
# workers the launchers start are fresh interpreters.
# Negative controls: the same function and seed launched as one plain process (the --cpu launch) ends
# elsewhere; our --multi_gpu launch has 2 processes. (The handout's en-dash command and the deprecation: launch_module_deprecated.py.)
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/launching/launchers_give_same_result.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs; ~5 s: two child launches, three fresh workers)
import gc
import inspect
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
import torch.distributed.run
from accelerate import Accelerator
from accelerate.commands.launch import launch_command, launch_command_parser
from accelerate.utils import gather_object, set_seed

import _claims

accelerator = Accelerator()


def train_weights(accelerator, seed):
    """SGD on a Linear(4, 1), 16 samples, batches of 4 per rank: 2 steps on 2 ranks, 4 on one process."""
    set_seed(seed)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    model, optimizer, loader = accelerator.prepare(model, optimizer, torch.utils.data.DataLoader(data, batch_size=4))
    for x, y in loader:
        accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
        optimizer.step()
        optimizer.zero_grad()
    return torch.cat([p.detach().flatten() for p in accelerator.unwrap_model(model).parameters()]).tolist()


# The child script: the very same function, then one JSON file per process.
CHILD = f"""
import json, os, sys, torch
from accelerate import Accelerator
from accelerate.utils import set_seed

{inspect.getsource(train_weights)}
accelerator = Accelerator()  # ACCELERATE_USE_CPU=true in the environment: gloo on CPU
weights = {{seed: train_weights(accelerator, seed) for seed in (0, 1)}}
with open(os.path.join(sys.argv[1], f"{{os.getpid()}}.json"), "w") as out:
    json.dump({{"world": accelerator.num_processes, "type": str(accelerator.distributed_type), "weights": weights}}, out)
accelerator.end_training()  # destroys the process group
# torch 2.13 on CPU sometimes aborts in its C++ teardown at exit ("terminate called without an active
# exception", SIGABRT) after all the work is done; leave without that teardown, the results are written.
os._exit(0)
"""

# A child launch must not see this launch's rendezvous or the harness's report file.
SCRUB = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK",
         "ROLE_RANK", "ROLE_NAME", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "PROOF_REPORT_FILE")


def clean_env(use_cpu):
    env = {k: v for k, v in os.environ.items()
           if k not in SCRUB and not k.startswith(("TORCHELASTIC_", "TORCH_NCCL_", "ACCELERATE_"))}
    if use_cpu:
        env["ACCELERATE_USE_CPU"] = "true"
    env["OMP_NUM_THREADS"] = "1"
    return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accelerate_launch(argv):
    """What the `accelerate launch` command runs (accelerate/commands/launch.py, main)."""
    launch_command(launch_command_parser().parse_args(argv))


def start(name, entry_point, argv, script, use_cpu=True):
    """Fork rank 0 into a child launcher that runs `entry_point(argv + [script, out])`, as the command line
    would; each process the launcher starts writes a JSON file into `out`."""
    out = pathlib.Path(workdir, name)
    out.mkdir()
    log = pathlib.Path(workdir, f"{name}.log")
    pid = os.fork()
    if pid == 0:  # the child launcher
        code = 1
        try:
            gc.disable()  # never free the parent's torch objects (its process group) here
            with open(log, "w") as sink:  # the launcher's and its workers' output
                os.dup2(sink.fileno(), 1)
                os.dup2(sink.fileno(), 2)
            sys.stdout = open(1, "w", buffering=1, closefd=False)  # not the harness's log of rank 0
            sys.stderr = open(2, "w", buffering=1, closefd=False)
            os.environ.clear()
            os.environ.update(clean_env(use_cpu))
            sys.argv = [name, *argv, script, str(out)]
            entry_point([*argv, script, str(out)])
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        except BaseException:  # noqa: BLE001  report it in the log, then leave
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)  # no atexit, no teardown of the copied harness state
    return out, log, pid


def finish(name, out, log, pid, timeout=90):
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGTERM)  # the elastic agent stops its workers on SIGTERM
            _, status = os.waitpid(pid, 0)
            code = f"killed after {timeout} s"
            break
        time.sleep(0.05)
    if code != 0:  # show the child's own error, not just its exit code
        raise RuntimeError(f"{name} launch failed ({code}):\n{log.read_text()[-3000:]}")
    return [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]


# --- accelerate launch: this snippet's own ranks run the function ---
ours = gather_object([{"world": accelerator.num_processes, "type": str(accelerator.distributed_type),
                       "weights": {str(seed): train_weights(accelerator, seed) for seed in (0, 1)}}])

results = None
if accelerator.is_main_process:
    with tempfile.TemporaryDirectory() as workdir:
        script = os.path.join(workdir, "train.py")
        pathlib.Path(script).write_text(CHILD)
        children = {  # both at once: each is mostly the import of torch in the workers
            # torchrun --nproc_per_node 2 --master_port PORT train.py OUT
            "torchrun": start("torchrun", torch.distributed.run.main,
                              ["--nproc_per_node", "2", "--master_port", str(free_port())], script),
            # accelerate launch --cpu --num_processes 2 ... train.py OUT
            "cpu_flag": start("cpu_flag", accelerate_launch,
                              ["--cpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
                               "--dynamo_backend", "no"], script, use_cpu=False),
        }
        results = {name: finish(name, *child) for name, child in children.items()}
        results["accelerate"] = ours
accelerator.wait_for_everyone()  # rank 1 waits here while rank 0's children run

if accelerator.is_main_process:
    def weights(launch, seed):
        return torch.tensor([rank["weights"][str(seed)] for rank in results[launch]])

    _claims.at_most(
        "accelerate_launch_and_torchrun_train_alike",
        measured=(weights("accelerate", 0) - weights("torchrun", 0)).abs().max().item(),
        # Control: the same function and seed launched without the 2-rank world (accelerate launch --cpu: one
        # plain process, DistributedType.NO, all 16 samples in 4 steps of 4).
        control=(weights("cpu_flag", 0) - weights("torchrun", 0)).abs().max().item(),
        tolerance=1e-6,
        other_seed_gap=(weights("accelerate", 0) - weights("torchrun", 1)).abs().max().item(),
        accelerate_ranks=[(r["world"], r["type"]) for r in results["accelerate"]],
        torchrun_ranks=[(r["world"], r["type"]) for r in results["torchrun"]],
    )
    _claims.equal(
        "cpu_flag_starts_one_process",
        measured=len(results["cpu_flag"]),
        control=len(results["accelerate"]),
        expected=1,
        cpu_flag_ranks=[(r["world"], r["type"]) for r in results["cpu_flag"]],
    )
