"""python verify/with_parent.py PARENT_PID COMMAND...: becomes COMMAND (exec, same pid), which the kernel
SIGKILLs when PARENT_PID dies, however it dies (SIGKILL, the OOM killer, a CI cancel).

The harness starts each `accelerate launch` through this, and the ranks already die with their launcher
(verify/worker.py), so a harness that is killed leaves nothing waiting for gloo's 30-minute timeout.
Linux keeps the parent-death signal across exec. Kept free of imports beyond the standard library:
it runs before every launch.
"""

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main(parent: int, command: list[str]) -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the line above: nothing will signal us
            sys.exit(1)
    os.execv(command[0], command)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2:])
