# RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT: the launcher (torch elastic,
# behind both torchrun and `accelerate launch`) writes them into each worker's environment; Accelerate
# reads them. RANK is the global index over all nodes, LOCAL_RANK the index on this node: the device
# index. Using the global rank as a device index (`torch.cuda.set_device(dist.get_rank())`) works on one
# node and points past the last GPU on the second.
# Part 1 reads the variables in this launch's own 2 ranks. Part 2: rank 0 forks 4 fresh processes with
# the environment torchrun gives a job of 2 nodes x 2 processes; each builds its group through
# PartialState(cpu=True) (env:// rendezvous at MASTER_ADDR:MASTER_PORT) and reports its indices.
# Part 1b: neither `accelerate launch` (this rank's own command line) nor torchrun (the worker command its
# config_from_args builds) passes a --local-rank argument; the deprecated torch.distributed.launch does.
# Negative controls: the launcher process's own environment (none of the variables); the command line of
# a worker torch.distributed.launch starts, and the worker command it builds; the device index taken from
# LOCAL_RANK (accelerator.local_process_index) instead of the global rank.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/launching/rank_variables_and_device_index.py
import gc
import json
import multiprocessing
import os
import queue
import signal
import socket
import tempfile
import time
import warnings

import psutil
import torch.distributed as dist
import torch.distributed.launch
import torch.distributed.run
from accelerate import Accelerator, PartialState
from accelerate.state import AcceleratorState
from torch.distributed import distributed_c10d

import _claims

NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
NODES, PER_NODE = 2, 2  # the simulated job: 2 machines with 2 GPUs each
HARD_DEADLINE_S = 60

accelerator = Accelerator()

# --- part 1: who sets the variables, and what Accelerate makes of them ---------------------------------
# This rank's environment AS IT STARTED (/proc/<pid>/environ): what the launcher gave it. os.environ would
# not do: on MULTI_CPU, PartialState itself writes RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE back
# into os.environ (and MASTER_PORT when missing), whoever set them first.
started_with = psutil.Process().environ()
mine = {name: started_with.get(name) for name in NAMES}
launcher = psutil.Process(os.getppid()).environ()  # the torch elastic agent = the `accelerate launch` process
_claims.equal(
    "launcher_sets_the_variables",
    measured=[mine[name] is not None for name in NAMES],
    control=[launcher.get(name) is not None for name in NAMES],  # the launcher's own environment
    expected=[True] * len(NAMES),
    values=mine,
    accelerate=[accelerator.process_index, accelerator.local_process_index, accelerator.num_processes],
)

# --- part 1b: no --local_rank argument ---------------------------------------------------------------
# (a) This rank's command line as `accelerate launch` started it. Control: the same reading (psutil's
# cmdline, the same filter) in a worker that the deprecated torch.distributed.launch really starts, here,
# in this rank (its agent runs in-process: nothing to import, a fraction of a second), for the same
# `--nproc-per-node 1 train.py --lr 0.1` (plus a free --master-port and a --log-dir).
# (b) The worker command torchrun's own config_from_args builds (torch.distributed.run, the function
# torchrun's main runs; nothing is started). Control: the same function given torch.distributed.launch's
# parse of the same command (its --use-env defaults to False), which appends --local-rank=<local rank>.
def local_rank_flags(arguments):
    return [a for a in arguments if a.replace("_", "-").startswith("--local-rank")]


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


READ_ARGV = "import json, os, psutil\njson.dump(psutil.Process().cmdline(), open(os.environ['ARGV_OUT'], 'w'))\n"
HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)  # the agent installs handlers for these


def argv_of_a_worker_started_by_torch_distributed_launch():
    saved_env, saved_handlers = dict(os.environ), {s: signal.getsignal(s) for s in HANDLED}
    try:
        with tempfile.TemporaryDirectory() as scratch:
            script, out = os.path.join(scratch, "train.py"), os.path.join(scratch, "argv.json")
            with open(script, "w") as f:
                f.write(READ_ARGV)
            os.environ["ARGV_OUT"] = out  # the worker inherits the agent's environment
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # "torch.distributed.launch is deprecated"
                torch.distributed.launch.main(["--nproc-per-node", "1", "--master-port", str(free_port()),
                                               "--log-dir", os.path.join(scratch, "logs"), script, "--lr", "0.1"])
            with open(out) as f:
                return json.load(f)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        for s, handler in saved_handlers.items():
            signal.signal(s, handler)


own_args = psutil.Process().cmdline()
legacy_worker_argv = argv_of_a_worker_started_by_torch_distributed_launch()
_claims.equal(
    "accelerate_launch_passes_no_local_rank_argument",
    measured=local_rank_flags(own_args),
    control=local_rank_flags(legacy_worker_argv),  # a worker torch.distributed.launch started
    expected=[],
    this_rank_argv=own_args[1:],
    torch_distributed_launch_worker_argv=legacy_worker_argv[1:],
)

with tempfile.TemporaryDirectory() as logs:  # config_from_args makes a log dir when none is given
    command = ["--nproc-per-node", "1", "--log-dir", logs, "train.py", "--lr", "0.1"]
    _, _, torchrun_args = torch.distributed.run.config_from_args(torch.distributed.run.parse_args(command))
    _, _, legacy_args = torch.distributed.run.config_from_args(torch.distributed.launch.parse_args(command))
_claims.equal(
    "torchrun_passes_no_local_rank_argument",
    measured=local_rank_flags(torchrun_args),
    control=local_rank_flags(legacy_args),  # torch.distributed.launch's parse of the same command
    expected=[],
    torchrun_worker_args=torchrun_args,
    torch_distributed_launch_worker_args=legacy_args,
)


# --- part 2: 2 nodes x 2 processes, as torchrun would start them -------------------------------------
def worker(global_rank, port, results):
    gc.disable()  # never collect the parent's garbage here: freeing a torch process group in a forked child can abort it (SIGABRT seen)
    inherited = distributed_c10d._world  # the harness's group, copied by fork: keep it alive, never use it
    distributed_c10d._world = distributed_c10d._World()
    AcceleratorState._reset_state(reset_partial_state=True)
    for variable in [v for v in os.environ if v.startswith("TORCHELASTIC_")]:
        del os.environ[variable]  # TORCHELASTIC_USE_AGENT_STORE would make every rank a client of a store nobody serves
    os.environ.update(  # what torch elastic's LocalElasticAgent writes for this worker
        RANK=str(global_rank), LOCAL_RANK=str(global_rank % PER_NODE), GROUP_RANK=str(global_rank // PER_NODE),
        WORLD_SIZE=str(NODES * PER_NODE), LOCAL_WORLD_SIZE=str(PER_NODE),
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
    )  # fmt: skip
    try:
        state = PartialState(cpu=True)  # env:// rendezvous; on GPUs the device would be cuda:<local index>
        results.put((global_rank, state.process_index, state.local_process_index, dist.get_rank(),
                     dist.get_world_size(), None))  # fmt: skip
        dist.barrier()  # everyone has reported before anyone leaves
    except BaseException as error:  # noqa: BLE001
        results.put((global_rank, None, None, None, None, repr(error)[-300:]))
    finally:
        results.close()
        results.join_thread()  # put() hands the item to a feeder thread: flush it before leaving
        del inherited
        os._exit(0)


if accelerator.is_main_process:
    gc.collect()  # free the parent's garbage (a destroyed process group, say) in the parent, before forking
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    port = free_port()
    children = [context.Process(target=worker, args=(r, port, results), daemon=True) for r in range(NODES * PER_NODE)]
    rows = {}
    try:
        for child in children:
            child.start()
        deadline = time.monotonic() + HARD_DEADLINE_S
        while len(rows) < len(children) and time.monotonic() < deadline:
            try:
                row = results.get(timeout=0.1)
            except queue.Empty:
                continue
            rows[row[0]] = row
    finally:
        for child in children:
            child.join(timeout=5)
        for child in children:
            if child.is_alive():
                child.kill()
                child.join(timeout=5)
    table = [rows.get(r) for r in range(NODES * PER_NODE)]
    ok = all(row and row[5] is None for row in table)
    _claims.equal(
        "local_index_is_local_rank",
        measured=[row[2] for row in table] if ok else table,
        control=[row[1] for row in table] if ok else None,  # accelerate's process_index: the global rank
        expected=[0, 1, 0, 1],
        world_sizes=[row[4] for row in table] if ok else None,
    )
    _claims.equal(
        "global_rank_as_device_index_misses_on_node_2",
        # a node has PER_NODE GPUs, cuda:0 .. cuda:PER_NODE-1; count the processes that would pick a GPU
        # that does not exist if they used the global rank as their device index
        measured=sum(row[3] >= PER_NODE for row in table) if ok else None,
        control=sum(row[2] >= PER_NODE for row in table) if ok else None,  # LOCAL_RANK as the index
        expected=2,
        device_index_from_global_rank=[row[3] for row in table] if ok else None,
        device_index_from_local_rank=[row[2] for row in table] if ok else None,
    )
accelerator.wait_for_everyone()
