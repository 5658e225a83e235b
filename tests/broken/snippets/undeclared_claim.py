# Broken on purpose: reports a claim its page does not declare.
from accelerate import Accelerator

import _claims

Accelerator()
_claims.equal("declared", measured=1, control=2, expected=1)
_claims.equal("surprise", measured=1, control=2, expected=1)
