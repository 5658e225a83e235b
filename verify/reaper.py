"""Nothing the harness starts outlives it, whichever way the run ends.

Launchers start in sessions of their own and torch starts each rank in another (its
`start_new_session=True`), so no single process group holds a launch: a launch is killed group by
group (`kill_groups`). Every live launch and lab kernel is registered here; SIGTERM, SIGHUP or Ctrl-C
kill them all at once, set `stopping` (so nothing writes evidence for work it cut short), and then
interrupt the run as Ctrl-C does.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading

import psutil

stopping = threading.Event()  # set once the run is being stopped: write no verdict from here on
_live: dict[int, object] = {}  # id -> a callable that kills one launch or one kernel
_numbers = itertools.count()
_lock = threading.Lock()


def kill_groups(processes, groups: dict | None = None) -> None:
    """SIGKILL these processes (psutil.Process objects or pids), every process below them, every process
    group any of them leads, and the given groups, {group id: its leader when first seen} (a rank's own
    forks live in its group, and outlive the rank); wait until gone. psutil.Process objects remember
    their start time, so a pid reused since, or a group led by a reused pid, is not touched."""
    victims, leaders = {}, dict(groups or {})
    for group, leader in list(leaders.items()):
        with contextlib.suppress(psutil.NoSuchProcess):
            if psutil.Process(group) != leader:  # the pid now belongs to another process: not our group
                del leaders[group]
    groups = set(leaders)
    for item in processes:
        try:
            process = item if isinstance(item, psutil.Process) else psutil.Process(item)
            if not process.is_running():
                continue
            for found in [process, *process.children(recursive=True)]:
                victims[found.pid] = found
                with contextlib.suppress(ProcessLookupError):
                    if os.getpgid(found.pid) == found.pid:  # a group it leads: started by us as a session
                        groups.add(found.pid)
        except psutil.NoSuchProcess:
            continue
    groups.discard(os.getpgrp())  # never our own group: that would be the test runner itself
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    for victim in victims.values():
        with contextlib.suppress(psutil.NoSuchProcess):
            victim.kill()
    psutil.wait_procs(list(victims.values()), timeout=10)


@contextlib.contextmanager
def tracked(kill):
    """While inside, `kill()` is called if the run is stopped by a signal."""
    number = next(_numbers)
    with _lock:
        _live[number] = kill
    try:
        yield
    finally:
        with _lock:
            _live.pop(number, None)


def stop_everything() -> None:
    stopping.set()
    with _lock:
        kills = list(_live.values())
    for kill in kills:
        with contextlib.suppress(Exception):
            kill()


def _on_signal(signum, frame):
    stop_everything()
    raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")


_installed = 0


@contextlib.contextmanager
def stop_on_signals():
    """SIGTERM, SIGHUP and SIGINT kill every registered launch and kernel, then interrupt the run.
    Only the main thread may install handlers; elsewhere this does nothing (the main thread's do)."""
    global _installed
    if threading.current_thread() is not threading.main_thread() or _installed:
        yield
        return
    previous = {signum: signal.signal(signum, _on_signal) for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    _installed += 1
    try:
        yield
    finally:
        _installed -= 1
        for signum, handler in previous.items():
            signal.signal(signum, handler)


RUN_TOKEN = "VERIFY_RUN_TOKEN"  # set in a launch's environment: every process it starts inherits it


def tagged(token: str) -> list[tuple[psutil.Process, dict]]:
    """Every live process whose environment carries `RUN_TOKEN=token`, with that environment: found
    wherever it went (a double fork under setsid re-parents to pid 1, out of reach of any tree walk)."""
    found = []
    marker = f"{RUN_TOKEN}={token}".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as environ:
                variables = environ.read().split(b"\0")
            if marker not in variables:
                continue
            process = psutil.Process(int(entry.name))
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            env = dict(v.decode(errors="replace").partition("=")[::2] for v in variables if b"=" in v)
            found.append((process, env))
        except (OSError, psutil.Error):  # gone, or another user's
            continue
    return found
