# N8: one snippet named by two pages; each page keeps its own evidence.
import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
total = torch.tensor([float(accelerator.process_index + 1)])
dist.all_reduce(total)
_claims.equal("shared_sum", measured=total.item(), control=float(accelerator.process_index + 1), expected=3.0)
