# Broken on purpose: reports claim "same" falsely; a sibling proof on the same page reports "same" truly.
from accelerate import Accelerator

import _claims

Accelerator()
_claims.at_most("same", measured=1.0, control=5.0, tolerance=0.5)
