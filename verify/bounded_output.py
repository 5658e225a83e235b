"""A launch's output, capped where it is written: at the file descriptor, not in Python.

The launcher, its ranks and anything they start write to fd 1 and 2 (os.write, C libraries, a child
shell), where no Python-level cap sees it. So their stdout is a pipe, and a thread here keeps the first
`head` bytes and the last `tail` bytes of it in the log file (the launcher's failure summary comes
last), with one line saying how much was cut between them.
"""

from __future__ import annotations

import os
import select
import threading
from pathlib import Path

HEAD_BYTES = 2_000_000
TAIL_BYTES = 1_000_000
CHUNK = 1 << 20


class BoundedOutput:
    def __init__(self, path: Path, head: int = HEAD_BYTES, tail: int = TAIL_BYTES):
        self.path, self.head, self.tail_limit = path, head, tail
        self._read, self.write_fd = os.pipe()
        self._file = open(path, "wb")
        self._kept = 0  # bytes of the head written to the file
        self._tail = bytearray()
        self._cut = 0  # bytes dropped between the head and the tail
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._drain, name=f"output of {path.parent.name}", daemon=True)
        self._thread.start()

    def started(self) -> None:
        """Call once every writer has been started: only they hold the write end from now on."""
        if self.write_fd is not None:
            os.close(self.write_fd)
            self.write_fd = None

    def _drain(self) -> None:
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([self._read], [], [], 0.2)
                if not ready:
                    continue
                data = os.read(self._read, CHUNK)
                if not data:
                    return  # every writer has closed it: the launch and all its processes are gone
                self._keep(data)
        finally:
            os.close(self._read)

    def _keep(self, data: bytes) -> None:
        with self._lock:
            if self._closed:
                return
            room = self.head - self._kept
            if room > 0:
                self._file.write(data[:room])
                self._file.flush()  # a crash story read mid-run sees what came so far
                self._kept += min(room, len(data))
                data = data[room:]
            if data:
                self._tail += data
                if len(self._tail) > self.tail_limit:
                    self._cut += len(self._tail) - self.tail_limit
                    del self._tail[: len(self._tail) - self.tail_limit]

    def settle(self, timeout: float = 3.0) -> None:
        """Wait (at most `timeout`) for the writers to be gone, then write the tail: the file is whole.
        Idempotent; whatever still comes after it (a detached process holding the pipe) is dropped."""
        self.started()
        self._thread.join(timeout)
        with self._lock:
            if self._closed:
                return
            if self._cut:
                self._file.write(f"\n[output cut: {self._cut} bytes after the first {self.head} were not kept]\n".encode())
            self._file.write(bytes(self._tail))
            self._file.close()
            self._closed = True
        self._stop.set()
