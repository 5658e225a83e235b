"""Whether a launch wrote into the checkout's pages or snippets.

Ranks run in a scratch folder, but nothing stops a snippet from writing `../../docs/...` on purpose: the
harness is no sandbox. It notices instead: the files under these folders (size and mtime) before and
after, and a snippet during which they changed fails, naming the files.
"""

from __future__ import annotations

import os
from pathlib import Path


def snapshot(folders, ignore=()) -> dict[str, tuple[int, int]]:
    """path -> (size, mtime_ns) of every file under `folders`, but bytecode caches and `ignore` folders."""
    ignored = tuple(str(Path(folder)) + os.sep for folder in ignore)
    found = {}
    for folder in dict.fromkeys(str(Path(folder)) for folder in folders):
        for top, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if d != "__pycache__" and not (os.path.join(top, d) + os.sep).startswith(ignored)]
            for name in files:
                path = os.path.join(top, name)
                try:
                    info = os.stat(path)
                except OSError:  # gone between the listing and the stat
                    continue
                found[path] = (info.st_size, info.st_mtime_ns)
    return found


def changes(before: dict, after: dict) -> list[str]:
    """'docs/x.md (new)', '... (changed)', '... (deleted)', sorted."""
    found = [f"{path} (new)" for path in after.keys() - before.keys()]
    found += [f"{path} (deleted)" for path in before.keys() - after.keys()]
    found += [f"{path} (changed)" for path in before.keys() & after.keys() if before[path] != after[path]]
    return sorted(found)
