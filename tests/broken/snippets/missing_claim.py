# Broken on purpose: the page declares two claims, the snippet reports one.
from accelerate import Accelerator

import _claims

Accelerator()
_claims.equal("reported", measured=1, control=2, expected=1)
