# A real distributed hang, caught and stopped: two forked child processes form a 2-rank gloo world of
# their own (one child per launched rank). Child rank 0 has 3 batches, child rank 1 has 2; each batch
# all-reduces its gradient, and at the end each calls barrier(). On its 3rd batch rank 0 waits in
# all_reduce for a partner that is waiting in barrier(): both wait forever (timeout 60 s). The parent
# kills them at a hard deadline and checks with psutil that no child is left.
# Beside it, with the same deadline: the fix (all-reduce a "do we all still have data?" flag so both
# ranks stop after 2 batches), the bug with a 1 s process-group timeout (an error instead of a hang),
# and mismatched shapes (gloo aborts the receiving process instead of hanging).
# Negative controls: the fixed loop (nobody hangs); the 60 s timeout (no error within the deadline);
# the same buggy loop with equal shapes (no size-mismatch message); the child processes counted before
# the kill.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/failures/hang_uneven_batches_killed.py
import multiprocessing
import os
import socket
import tempfile
import time
from datetime import timedelta

import psutil
import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

DEADLINE_S = 2.5  # the fixed loop finishes in well under a second; a hang is still waiting here

accelerator = Accelerator()
rank = accelerator.process_index


def training_loop(child_rank, scenario):
    """What each child runs: its batches, an all-reduce per batch, a barrier at the end."""
    batches = 3 if child_rank == 0 else 2  # rank 0 got one batch more (uneven data)
    step = 0
    while True:
        if scenario == "fixed":  # THE FIX: everyone agrees to stop as soon as anyone is out of data
            has_data = torch.tensor([1.0 if step < batches else 0.0])
            dist.all_reduce(has_data, op=dist.ReduceOp.MIN)
            if has_data.item() == 0:
                break
        elif step == batches:
            break
        grad = torch.ones(4 + (child_rank if scenario == "shapes" else 0))  # "shapes": 4 vs 5 elements
        dist.all_reduce(grad)  # on its 3rd batch rank 0 waits here for a partner that never comes
        step += 1
    dist.barrier()  # rank 1 waits here, for a partner that is still in all_reduce


def child_main(child_rank, port, scenario, timeout_s, log_path, results):
    """Runs in a forked child: its own process group on its own port, then the loop."""
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT)
    os.dup2(log, 1), os.dup2(log, 2)  # C++ messages (gloo, c10d) go to this child's log file
    # The fork copied the launcher's default group (torch.distributed module state): start afresh.
    dist.distributed_c10d._world = dist.distributed_c10d._World()
    outcome = "finished"
    try:
        # Its own TCPStore, served by child rank 0. (init_method="tcp://..." would do the same in a plain
        # script; under a launcher TORCHELASTIC_USE_AGENT_STORE=True would make rank 0 a mere client.)
        store = dist.TCPStore("127.0.0.1", port, 2, is_master=child_rank == 0, timeout=timedelta(seconds=30))
        dist.init_process_group("gloo", store=store, rank=child_rank, world_size=2,
                                timeout=timedelta(seconds=timeout_s))
        training_loop(child_rank, scenario)
    except Exception as error:  # noqa: BLE001  the message is the evidence
        outcome = f"error: {error}"
    results.send(outcome)
    os._exit(0)  # leave without torch's teardown, which could wait on the peer


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answer(pipe):
    try:
        return pipe.recv()
    except EOFError:  # the child died before it could answer: killed, or aborted by gloo
        return "no answer"


SCENARIOS = {"uneven": 60, "fixed": 60, "uneven_1s_timeout": 1, "shapes": 60}  # name: timeout (s)
ports = [{name: free_port() for name in SCENARIOS}]
dist.broadcast_object_list(ports, src=0)  # both launched ranks use rank 0's ports

fork = multiprocessing.get_context("fork")
started = time.perf_counter()
with tempfile.TemporaryDirectory() as tmp:
    children, pipes, logs = {}, {}, {}
    try:
        for name, timeout_s in SCENARIOS.items():  # this launched rank is child rank `rank` of each world
            reader, writer = fork.Pipe(duplex=False)
            logs[name] = os.path.join(tmp, f"{name}.log")
            scenario = "fixed" if name == "fixed" else "shapes" if name == "shapes" else "uneven"
            children[name] = fork.Process(target=child_main,
                                          args=(rank, ports[0][name], scenario, timeout_s, logs[name], writer))
            children[name].start()
            writer.close()  # the child holds the writing end; a killed child leaves EOF
            pipes[name] = reader
        deadline = time.monotonic() + DEADLINE_S
        for child in children.values():
            child.join(max(0.0, deadline - time.monotonic()))
        alive_at_deadline = {name: child.is_alive() for name, child in children.items()}
        children_before_kill = len(psutil.Process().children(recursive=True))
        # Both launched ranks look before either kills: killing one child ends its partner's wait too.
        dist.barrier()
    finally:
        for child in children.values():  # the hard stop: SIGKILL, then reap
            if child.is_alive():
                child.kill()
            child.join()
    children_after_kill = len(psutil.Process().children(recursive=True))
    outcome = {name: answer(pipes[name]) for name in SCENARIOS}
    exit_codes = {name: child.exitcode for name, child in children.items()}
    shapes_log = open(logs["shapes"]).read()
    equal_shapes_log = open(logs["uneven"]).read()  # the same loop, 4 elements on both ranks
elapsed = time.perf_counter() - started

# Each launched rank saw its own child of each world; put both halves together.
everyone = [None] * accelerator.num_processes
dist.all_gather_object(everyone, {"alive": alive_at_deadline, "outcome": outcome, "exit": exit_codes,
                                  "shapes_log_says_mismatch": "Received data size doesn't match expected size"
                                  in shapes_log,
                                  "equal_shapes_log_says_mismatch": "Received data size doesn't match expected size"
                                  in equal_shapes_log})
count = lambda key, name: sum(bool(view[key][name]) for view in everyone)  # noqa: E731
timed_out = lambda name: sum("Timed out" in view["outcome"][name] for view in everyone)  # noqa: E731

_claims.equal(
    "uneven_batches_hang_until_killed",
    measured=count("alive", "uneven"),  # children still waiting at the deadline (of 2)
    control=count("alive", "fixed"),
    expected=2,
    deadline_s=DEADLINE_S,
    outcomes_uneven=[view["outcome"]["uneven"] for view in everyone],
    outcomes_fixed=[view["outcome"]["fixed"] for view in everyone],
    seconds_for_all_four_worlds=elapsed,
)
_claims.at_least(
    "process_group_timeout_turns_hang_into_error",
    measured=timed_out("uneven_1s_timeout"),
    control=timed_out("uneven"),
    bound=1,
    outcomes_1s_timeout=[view["outcome"]["uneven_1s_timeout"][:300] for view in everyone],
)
_claims.equal(
    "mismatched_shapes_abort_with_gloo_message",
    measured=sum(view["shapes_log_says_mismatch"] for view in everyone),  # children whose log has it
    control=sum(view["equal_shapes_log_says_mismatch"] for view in everyone),  # same loop, equal shapes
    expected=1,  # the rank that receives more data than it expects aborts
    exit_codes_shapes=[view["exit"]["shapes"] for view in everyone],
    outcomes_shapes=[view["outcome"]["shapes"][:300] for view in everyone],
)
_claims.equal(
    "no_child_left_behind",
    measured=children_after_kill,  # this launched rank's live child processes after kill + join
    control=children_before_kill,
    expected=0,
)
