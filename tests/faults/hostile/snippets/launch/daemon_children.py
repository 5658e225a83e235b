# Leaves a grandchild behind on each rank, detached the way a daemon is: a new session, its parent gone,
# re-parented to pid 1 (no walk of the launch's process tree finds it).
import os
import subprocess

import _claims

subprocess.run(["setsid", "sh", "-c", f"sleep 7{7700 + int(os.environ['RANK'])} &"], check=True)
_claims.equal("daemon_children", measured=1.0, control=0.0, expected=1.0)
