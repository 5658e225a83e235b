# Reports claim "same" truly; judged after zz_false.py, it must not hide that one's failure.
from accelerate import Accelerator

import _claims

Accelerator()
_claims.at_most("same", measured=0.0, control=5.0, tolerance=0.5)
