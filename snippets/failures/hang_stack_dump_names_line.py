# Finding the rank and the line that hang: two forked children form their own 2-rank gloo world and
# hang the classic way (rank 0 has one batch more: it waits in all_reduce while rank 1 waits in
# barrier). Python's faulthandler, registered on SIGUSR1, prints every thread's stack when the parent
# sends the signal: each rank's dump names this file and the line it is stuck on. A third world runs
# the same loop with TORCH_DISTRIBUTED_DEBUG=DETAIL: the wrapper process group compares the
# collectives before running them and raises an error that names both.
# Negative controls: the same children, faulthandler registered and signalled the same way, with the
# cause of the hang removed (both ranks get 2 batches): nothing is stuck, so no dump names a stuck line;
# the same loop without DETAIL (no error: it hangs silently until killed). A fourth pair without
# faulthandler shows what SIGUSR1 does to a process that did not register it (details only).
# Ctrl-C: a fifth pair gets SIGINT while stuck in the blocking collective and raises no
# KeyboardInterrupt; its control is the same loop waiting for each collective in Python
# (async_op=True, polling is_completed), which raises it within that second.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/failures/hang_stack_dump_names_line.py
import faulthandler
import inspect
import multiprocessing
import os
import signal
import socket
import tempfile
import time
import traceback
from datetime import timedelta

import psutil
import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

DEADLINE_S = 2.5  # the children need ~0.2 s to meet; at the deadline they are stuck for good

accelerator = Accelerator()
rank = accelerator.process_index


def training_loop(child_rank, uneven=True):
    batches = 3 if child_rank == 0 and uneven else 2  # rank 0 got one batch more (uneven data)
    for _ in range(batches):
        dist.all_reduce(torch.ones(4))  # STUCK(rank 0)
    dist.barrier()  # STUCK(rank 1)


def wait_in_python(work):
    while not work.is_completed():  # the interpreter runs between polls, so signal handlers can run
        time.sleep(0.01)
    work.wait()  # a collective that completed with an error raises it here


def training_loop_waiting_in_python(child_rank):
    """The same uneven loop; each collective is started with async_op=True and waited for in Python."""
    for _ in range(3 if child_rank == 0 else 2):
        wait_in_python(dist.all_reduce(torch.ones(4), async_op=True))
    wait_in_python(dist.barrier(async_op=True))


source, first = inspect.getsourcelines(training_loop)
STUCK_LINE = {r: first + next(i for i, line in enumerate(source) if f"STUCK(rank {r})" in line) for r in (0, 1)}


def child_main(child_rank, port, scenario, dump_path, results):
    """Runs in a forked child: its own process group on its own port, then the loop."""
    log = os.open(dump_path + ".log", os.O_WRONLY | os.O_CREAT)
    os.dup2(log, 1), os.dup2(log, 2)  # C++ messages (gloo, c10d) go to this child's log file
    faulthandler.unregister(signal.SIGUSR1)  # a fork keeps the parent's handlers; start as a plain script
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C raises KeyboardInterrupt, as in a script
    if scenario in ("dump", "balanced"):
        # THE TOOL: on SIGUSR1, write every thread's Python stack to this file (py-spy dump does the
        # same from outside, without any code in the process)
        faulthandler.register(signal.SIGUSR1, file=open(dump_path, "w"), all_threads=True)
    if scenario == "detail":
        os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"  # normally set in the launch environment;
        dist.set_debug_level_from_env()  # torch.distributed reads it at import, so read it again here
    dist.distributed_c10d._world = dist.distributed_c10d._World()  # forget the launcher's default group
    outcome = "finished"
    try:
        store = dist.TCPStore("127.0.0.1", port, 2, is_master=child_rank == 0, timeout=timedelta(seconds=30))
        dist.init_process_group("gloo", store=store, rank=child_rank, world_size=2, timeout=timedelta(seconds=60))
        if scenario == "ctrl_c_polling":
            training_loop_waiting_in_python(child_rank)
        else:
            training_loop(child_rank, uneven=scenario != "balanced")
    except KeyboardInterrupt:
        outcome = "KeyboardInterrupt at " + traceback.format_exc().strip().splitlines()[-3].strip()
    except Exception as error:  # noqa: BLE001  the message is the evidence
        outcome = f"error: {error}"
    results.send(outcome)
    if scenario.startswith("ctrl_c"):  # stay until killed: an exiting child would end its partner's collective
        time.sleep(60)
    os._exit(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answer(pipe):
    try:
        return pipe.recv()
    except EOFError:  # killed before it could answer
        return "no answer"


SCENARIOS = ("dump", "balanced", "no_dump", "detail", "ctrl_c", "ctrl_c_polling")
ports = [{name: free_port() for name in SCENARIOS}]
dist.broadcast_object_list(ports, src=0)  # both launched ranks use rank 0's ports

fork = multiprocessing.get_context("fork")
started = time.perf_counter()
with tempfile.TemporaryDirectory() as tmp:
    children, pipes, dumps = {}, {}, {}
    try:
        for name in SCENARIOS:  # this launched rank is child rank `rank` of each 2-rank world
            reader, writer = fork.Pipe(duplex=False)
            dumps[name] = os.path.join(tmp, f"{name}.dump")
            children[name] = fork.Process(target=child_main, args=(rank, ports[0][name], name, dumps[name], writer))
            children[name].start()
            writer.close()
            pipes[name] = reader
        deadline = time.monotonic() + DEADLINE_S
        for child in children.values():
            child.join(max(0.0, deadline - time.monotonic()))
        for name in ("dump", "balanced", "no_dump"):  # what you would do by hand: kill -USR1 <pid>
            if children[name].is_alive():
                os.kill(children[name].pid, signal.SIGUSR1)
        for name in ("ctrl_c", "ctrl_c_polling"):  # what Ctrl-C in the terminal does to each process
            if children[name].is_alive():
                os.kill(children[name].pid, signal.SIGINT)
        signalled = time.monotonic()
        wait_until = signalled + 1.0
        while time.monotonic() < wait_until and not (os.path.exists(dumps["dump"]) and os.path.getsize(dumps["dump"])):
            time.sleep(0.02)
        time.sleep(0.1)  # let faulthandler finish writing
        # Answered within the second after Ctrl-C, while its partner is still stuck too (killing a
        # partner would end the collective with an error and let a pending KeyboardInterrupt through)
        early = {name: pipes[name].recv() for name in ("ctrl_c", "ctrl_c_polling") if pipes[name].poll(max(0.0, wait_until - time.monotonic()))}
        # 1: KeyboardInterrupt within the second; 0: no answer (still waiting in the collective);
        # -1: any other answer (the child failed or finished before the signal, so it proves nothing)
        interrupted = {name: 0 if name not in early else 1 if early[name].startswith("KeyboardInterrupt") else -1
                       for name in ("ctrl_c", "ctrl_c_polling")}
        # Both launched ranks have their dumps before either kills: a killed child frees its partner.
        dist.barrier()
    finally:
        for child in children.values():
            if child.is_alive():
                child.kill()
            child.join()
    left_behind = len(psutil.Process().children(recursive=True))
    read = lambda path: open(path).read() if os.path.exists(path) else ""  # noqa: E731
    dump, balanced_dump, no_dump = read(dumps["dump"]), read(dumps["balanced"]), read(dumps["no_dump"])
    outcome = {name: early[name] if name in early else answer(pipes[name]) for name in SCENARIOS}
    exit_codes = {name: child.exitcode for name, child in children.items()}
elapsed = time.perf_counter() - started

where = f'File "{inspect.getsourcefile(training_loop)}", line {STUCK_LINE[rank]}'
OWN_OP = {0: "OpType=ALLREDUCE", 1: "OpType=BARRIER"}  # what this rank's child is really running


def names_mismatch(text):
    return int("Detected mismatch between collectives on ranks" in text and OWN_OP[rank] in text)


_claims.equal(
    "faulthandler_dump_names_the_stuck_line",
    measured=int(where in dump),  # this rank's child: rank 0 in all_reduce, rank 1 in barrier
    control=int(where in balanced_dump),  # the same children with even data: not stuck anywhere
    expected=1,
    expected_frame=where,
    dump=dump[:700],
    balanced_child_outcome=outcome["balanced"],
    balanced_dump=balanced_dump[:300],
    no_dump_child_exit_code=exit_codes["no_dump"],  # -10: terminated by SIGUSR1 (nothing registered)
    children_left_behind=left_behind,
    seconds=elapsed,
)
_claims.equal(
    "debug_detail_names_the_mismatched_collectives",
    measured=names_mismatch(outcome["detail"]),
    control=names_mismatch(outcome["dump"]),  # the same loop without DETAIL
    expected=1,
    detail_error=outcome["detail"][:900],
    # ProcessGroupWrapper all-gathers the LENGTH of each fingerprint first; when the lengths differ it
    # decodes the other rank's one-element length tensor as if it were a fingerprint
    other_rank_as_reported=outcome["detail"].split("but Rank")[-1][:120] if "but Rank" in outcome["detail"] else "",
    without_detail=outcome["dump"],
)
_claims.equal(
    "ctrl_c_does_not_interrupt_a_blocking_collective",
    measured=interrupted["ctrl_c"],  # this rank's child, stuck in the blocking gloo call
    control=interrupted["ctrl_c_polling"],  # the same loop waiting in Python
    expected=0,
    blocked_child_outcome=outcome["ctrl_c"][:200],  # "no answer": still blocked when killed
    polling_child_outcome=outcome["ctrl_c_polling"][:200],
)
