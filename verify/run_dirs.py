"""Run folders under .verify/runs: one per session, and a session never removes one that is in use.

Each session holds an exclusive `flock` on a lock file inside its folder for as long as it lives (the
kernel drops the lock when the process ends, however it ends). Pruning old folders skips any whose lock
another process still holds, so two `pytest verify` runs at once never delete each other's launches.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from pathlib import Path

LOCK_NAME = ".in-use"
_held: list = []  # this process's lock files, open until it exits


def in_use(folder: Path) -> bool:
    """Whether a live process holds this run folder's lock (this process included)."""
    lock = folder / LOCK_NAME
    if not lock.exists():
        return False
    with open(lock, "a") as probe:
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(probe, fcntl.LOCK_UN)
    return False


def claim(folder: Path) -> Path:
    """Hold this folder's lock for the rest of this process's life."""
    lock = open(folder / LOCK_NAME, "a")
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    _held.append(lock)
    return folder


def fresh_run_dir(runs: Path, keep: int = 5, prefix: str = "run-") -> Path:
    """A folder of its own for this session; of the older ones not in use, the newest `keep` stay."""
    runs.mkdir(parents=True, exist_ok=True)
    idle = [old for old in sorted(runs.glob(f"{prefix}*")) if old.is_dir() and not in_use(old)]
    for old in idle[: max(0, len(idle) - keep)]:
        shutil.rmtree(old, ignore_errors=True)
    return claim(Path(tempfile.mkdtemp(prefix=time.strftime(f"{prefix}%Y%m%d-%H%M%S-"), dir=runs)))
