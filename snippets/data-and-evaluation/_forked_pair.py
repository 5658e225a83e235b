"""Run a function in 2 forked child processes that form their OWN 2-process gloo group.

Used by the proofs whose negative control crashes or desynchronises a process group (a collective
that one rank skips, a gather of unequal shapes): that must never happen in the launched ranks, whose
process group the next proofs still need. Forked children inherit the already-imported torch (no
import cost), forget the parent's process groups in their own memory, rendezvous on a fresh TCPStore
on a free port, and are killed after a hard time limit whatever happens. Every child that was started
is killed (if still alive) and joined before run_pair returns or raises, so no process is left behind.
"""

import datetime
import multiprocessing
import queue
import resource
import socket
import time
import traceback

import torch.distributed as dist


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _child(rank, port, results, fn):
    # A child that gloo aborts (SIGABRT) must not leave a core file in the working directory.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        c10d = dist.distributed_c10d
        c10d._world = c10d._World()  # this child's copy only: the parent's groups are left untouched
        # 5 s: the pair meets within milliseconds; a partner that died first (a control's crash) should
        # cost this run seconds, not the whole time limit.
        store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timeout=datetime.timedelta(seconds=5))
        dist.init_process_group("gloo", store=store, rank=rank, world_size=2, timeout=datetime.timedelta(seconds=5))
        results.put((rank, "finished", fn(rank)))
    except Exception as error:  # noqa: BLE001  the error IS the result of a control
        results.put((rank, "error", f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"))
    except BaseException:  # pragma: no cover
        results.put((rank, "error", traceback.format_exc(limit=1)))


def run_pair(fn, time_limit=20.0):
    """fn(rank) in 2 forked processes. Returns {rank: (status, value_or_error)} and the exit codes.

    A child that dies without reporting (e.g. SIGABRT from gloo) is reported as "died"; a child still
    running after `time_limit` seconds is killed and reported as "killed".
    """
    context = multiprocessing.get_context("fork")
    results, port = context.Queue(), _free_port()
    children = [context.Process(target=_child, args=(rank, port, results, fn), daemon=True) for rank in range(2)]
    started, outcome = [], {}

    def collect(timeout):
        try:
            rank, status, value = results.get(timeout=timeout)
        except queue.Empty:
            return False
        outcome[rank] = (status, value)
        return True

    try:
        for child in children:
            child.start()
            started.append(child)
        deadline = time.monotonic() + time_limit
        # Read the results while waiting: a child blocks at exit until what it put is read from the pipe.
        while any(child.is_alive() for child in started) and time.monotonic() < deadline:
            collect(min(0.05, max(0.0, deadline - time.monotonic())))
    finally:
        for child in started:
            if child.is_alive():
                child.kill()
        for child in started:
            child.join()  # after SIGKILL this returns at once
        while collect(0.2):
            pass
        results.close()
        results.join_thread()
    codes = [child.exitcode for child in children]
    for rank, code in enumerate(codes):
        if rank not in outcome:
            outcome[rank] = ("killed" if code == -9 else "died", f"exit code {code}")
    return outcome, codes
