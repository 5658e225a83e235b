# N33: `Accelerator()` reads ACCELERATE_GRADIENT_ACCUMULATION_STEPS as its default; the harness must keep
# the user's shell from setting it behind the page's back. The control asks for 2 steps in code.
from accelerate import Accelerator

import _claims

steps = Accelerator().gradient_accumulation_steps  # read before the control's Accelerator changes the shared state
asked = Accelerator(gradient_accumulation_steps=2).gradient_accumulation_steps
_claims.equal("accumulation_default_is_one", measured=steps, control=asked, expected=1)
