# Broken on purpose: the control meets the expectation too, so the check proves nothing.
from accelerate import Accelerator

import _claims

Accelerator()
_claims.at_most("cannot_fail", measured=0.0, control=0.0, tolerance=0.1)
