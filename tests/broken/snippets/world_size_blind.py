# A claim that holds on any number of processes: only the harness's world-size check can tell that the
# launch started one process where two were asked.
import torch
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
mean_of_ones = accelerator.reduce(torch.ones(1, device=accelerator.device), reduction="mean").item()
_claims.equal("mean_of_ones", measured=mean_of_ones, control=0.0, expected=1.0)
