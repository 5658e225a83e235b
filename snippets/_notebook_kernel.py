"""A notebook kernel for proofs about notebook_launcher, played by a forked child of rank 0.

A Jupyter kernel is a process with torch and accelerate imported and no process group. The child is
forked (torch already imported: no 5-s import), then forgets the launch it came from: Accelerate's state
and torch.distributed's world are reset and the launcher's variables removed. It runs one "cell" and
sends back what the cell returns; a cell that does not answer within the deadline has its kernel and
every worker notebook_launcher forked under it killed.
"""
import gc
import json
import multiprocessing
import os
import pathlib
import queue
import socket
import tempfile
import time

import psutil
from accelerate.state import AcceleratorState
from torch.distributed import distributed_c10d

LAUNCHER_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                      "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE",
                      "MIXED_PRECISION")  # fmt: skip


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def _kernel(cell, results_dir, answers):
    gc.disable()  # never collect the parent's garbage here: freeing a torch process group in a forked child can abort it (SIGABRT seen)
    inherited = distributed_c10d._world  # the harness's group, copied by fork: keep it alive, never use it
    distributed_c10d._world = distributed_c10d._World()
    AcceleratorState._reset_state(reset_partial_state=True)
    for name in list(os.environ):
        if name in LAUNCHER_VARIABLES or name.startswith(("TORCHELASTIC_", "ACCELERATE_", "PROOF_")):
            del os.environ[name]
    answer = None
    try:
        answer = cell(results_dir)
    except BaseException as raised:  # noqa: BLE001  a cell's error is its answer
        answer = f"{type(raised).__name__}: {raised}"
    finally:
        answers.put(answer)
        answers.close()
        answers.join_thread()  # put() hands the item to a feeder thread: flush it before leaving
        del inherited
        os._exit(0)


def run_cell(cell, deadline_s):
    """Run cell(results_dir) in a fresh kernel. Returns (its answer, the JSON reports the launched workers
    wrote into results_dir, seconds taken)."""
    gc.collect()  # free the parent's garbage (a destroyed process group, say) in the parent, before forking
    context = multiprocessing.get_context("fork")
    answers = context.Queue()
    with tempfile.TemporaryDirectory() as results_dir:
        # not a daemon: a daemonic process may not start children, and notebook_launcher starts some
        child = context.Process(target=_kernel, args=(cell, results_dir, answers))
        started = time.monotonic()
        try:
            child.start()
            answer = answers.get(timeout=deadline_s)
        except queue.Empty:
            answer = f"no answer within {deadline_s} s"
        finally:
            child.join(timeout=10)
            if child.is_alive():  # kill the kernel and the workers notebook_launcher forked under it
                tree = psutil.Process(child.pid).children(recursive=True) + [psutil.Process(child.pid)]
                for process in tree:
                    process.kill()
                psutil.wait_procs(tree, timeout=5)
                child.join(timeout=5)
        workers = [json.loads(p.read_text()) for p in sorted(pathlib.Path(results_dir).glob("*.json"))]
    return answer, workers, round(time.monotonic() - started, 2)
