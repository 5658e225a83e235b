# Broken on purpose: the measurement misses its expectation.
from accelerate import Accelerator

import _claims

Accelerator()
_claims.at_most("error_is_small", measured=1.0, control=5.0, tolerance=0.1)
