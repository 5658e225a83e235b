# Writes 24 MB per rank straight to file descriptor 1 (no Python stream to cap), half of it from a child.
import os
import subprocess

import _claims

chunk = b"y" * 1_000_000
for _ in range(12):
    os.write(1, chunk)
subprocess.run("head -c 12000000 /dev/zero | tr '\\0' z", shell=True, check=True)
_claims.equal("floods_fd_one", measured=1.0, control=0.0, expected=1.0)
