# Process-group timeouts. Accelerate passes no timeout unless you give one (InitProcessGroupKwargs drops
# fields left at their defaults), so a group gets torch's default: 30 minutes for gloo
# (torch/distributed/constants.py, default_pg_timeout). With
# Accelerator(kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=1))]) a collective that
# a peer never joins raises after ~1 s instead of hanging.
# To show it without touching the harness's own group, rank 0 forks two pairs of fresh processes; each
# pair builds its group through PartialState(cpu=True, **kwargs), exactly as Accelerator does, and rank 1
# of each pair calls all_reduce while its rank 0 never does. Each child has a hard deadline and is
# killed and joined in `finally`.
# Negative controls: the pair built without the timeout (still waiting after the short one has fired);
# InitProcessGroupKwargs with a timeout set; the short-timeout group's own timeout.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/launching/pg_timeout_fires.py
#   (~2.5 s: it waits for a 1-s timeout to fire and then 1 s more on the control)
import datetime
import gc
import multiprocessing
import os
import queue
import socket
import time

import torch
import torch.distributed as dist
from accelerate import Accelerator, PartialState
from accelerate.state import AcceleratorState
from accelerate.utils import InitProcessGroupKwargs
from torch.distributed import distributed_c10d

import _claims

SHORT = datetime.timedelta(seconds=1)
HARD_DEADLINE_S = 60  # no child outlives this, whatever happens
BUILD_S = 20.0  # rank 0 waits this long at most for both pairs to build their groups (~0.5 s)
FIRE_S = 2.0  # after the short pair's group is built, its 1-s timeout gets this long to fire
CONTROL_EXTRA_S = 1.0  # the control pair keeps waiting this long after the short one fired, and at least
# SHORT + CONTROL_EXTRA_S after its own group was built: twice the short timeout

accelerator = Accelerator()


def group_timeout_seconds(group=None):
    """The timeout stored in the gloo backend of a process group (the default group when None)."""
    group = group or dist.group.WORLD
    return group._get_backend(torch.device("cpu")).options._timeout.total_seconds()


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def member(name, rank, port, init_kwargs, results):
    """One process of a forked 2-process group: rank 1 waits in all_reduce for a rank 0 that never comes."""
    gc.disable()  # never collect the parent's garbage here: freeing a torch process group in a forked child can abort it (SIGABRT seen)
    inherited = distributed_c10d._world  # the harness's group, copied by fork: keep it alive, never use it
    distributed_c10d._world = distributed_c10d._World()  # a world with no group in it, as in a new process
    AcceleratorState._reset_state(reset_partial_state=True)
    for variable in [v for v in os.environ if v.startswith("TORCHELASTIC_")]:
        del os.environ[variable]  # TORCHELASTIC_USE_AGENT_STORE would make every rank a client of a store nobody serves
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))  # fmt: skip
    try:
        PartialState(cpu=True, **init_kwargs)  # what Accelerator(kwargs_handlers=[...]) calls
        timeout = group_timeout_seconds()
        if rank == 1:
            started = time.monotonic()
            try:
                dist.all_reduce(torch.ones(1))  # rank 0 never joins
                results.put((name, rank, timeout, "returned", "", time.monotonic() - started))
            except RuntimeError as error:
                results.put((name, rank, timeout, "raised", str(error)[-160:], time.monotonic() - started))
        else:
            results.put((name, rank, timeout, "idle", "", 0.0))
            time.sleep(HARD_DEADLINE_S)  # never joins; the parent kills it
    except BaseException as error:  # noqa: BLE001  report anything, then leave without cleanup
        results.put((name, rank, None, "crashed", repr(error)[-300:], 0.0))
    finally:
        results.close()
        results.join_thread()  # put() hands the item to a feeder thread: flush it before leaving
        del inherited
        os._exit(0)  # no atexit, no teardown of the copied harness group


short_kwargs = InitProcessGroupKwargs(timeout=SHORT).to_kwargs()
default_kwargs = InitProcessGroupKwargs().to_kwargs()  # its timeout field says 1800 s ... but is it passed?

if accelerator.is_main_process:
    gc.collect()  # free the parent's garbage (a destroyed process group, say) in the parent, before forking
    context = multiprocessing.get_context("fork")  # the child starts with torch already imported
    results = context.Queue()
    children = []
    seen = {}
    started = time.monotonic()
    try:
        for name, init_kwargs in (("short", short_kwargs), ("default", default_kwargs)):
            port = free_port()
            for rank in (0, 1):
                child = context.Process(target=member, args=(name, rank, port, init_kwargs, results), daemon=True)
                child.start()
                children.append(child)
        built_at = {}  # when each pair's rank 0 reported its group built (rank 1 is then in all_reduce)
        fired_at = None

        def listening():
            now = time.monotonic()
            if len(built_at) < 2:  # a pair still building its group (or crashed): wait for the build
                return now < started + BUILD_S and not any(o["outcome"] == "crashed" for o in seen.values())
            if fired_at is None:  # the 1-s timeout has not fired yet
                return now < built_at["short"] + SHORT.total_seconds() + FIRE_S
            return now < max(fired_at, built_at["default"] + SHORT.total_seconds()) + CONTROL_EXTRA_S

        while listening():
            try:
                name, rank, timeout, outcome, message, seconds = results.get(timeout=0.05)
            except queue.Empty:
                continue
            seen[(name, rank)] = {"timeout_s": timeout, "outcome": outcome, "message": message, "seconds": seconds}
            if rank == 0 and outcome == "idle":
                built_at[name] = time.monotonic()
            if (name, rank) == ("short", 1):
                fired_at = time.monotonic()
        listened_s = time.monotonic() - started
    finally:
        for child in children:
            child.kill()
        for child in children:
            child.join(timeout=10)

    def raised_timeout(name):
        found = seen.get((name, 1), {})
        return found.get("outcome") == "raised" and "Timed out" in found.get("message", "")

    _claims.equal(
        "short_timeout_raises",
        measured=raised_timeout("short"),
        control=raised_timeout("default"),  # same collective, group built without the timeout
        expected=True,
        short_rank1=seen.get(("short", 1)),
        default_rank1=seen.get(("default", 1), "still waiting in all_reduce when killed"),
        control_waited_extra_s=CONTROL_EXTRA_S,
        listened_s=round(listened_s, 2),  # from the forks to the last report
        children_heard_from=sorted(f"{name}/{rank}" for name, rank in seen),
        exit_codes=[child.exitcode for child in children],  # -9: killed by us at the end, as planned
    )
    _claims.equal(
        "default_group_timeout_is_30_minutes",
        # the group PartialState built here from InitProcessGroupKwargs().to_kwargs(): no timeout passed
        measured=(seen.get(("default", 0)) or {}).get("timeout_s"),
        control=(seen.get(("short", 0)) or {}).get("timeout_s"),  # the group built with timeout=1 s
        expected=1800.0,
        torch_default_pg_timeout_s=torch.distributed.constants.default_pg_timeout.total_seconds(),
        launch_group_timeout_s=group_timeout_seconds(),  # the group the launch built, the same way
        backend=dist.get_backend(),
    )

_claims.equal(
    "init_kwargs_pass_only_what_you_change",
    measured=sorted(default_kwargs),
    control=sorted(short_kwargs),  # the same handler with the timeout set
    expected=[],
    field_default_timeout_s=InitProcessGroupKwargs().timeout.total_seconds(),
    field_default_backend=InitProcessGroupKwargs().backend,
)
accelerator.wait_for_everyone()  # rank 1 waits here while rank 0's children run
