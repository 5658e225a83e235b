# A healthy snippet: one all-reduce, one claim that holds and whose control breaks it.
import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
total = torch.tensor([float(accelerator.process_index + 1)])
dist.all_reduce(total)  # 1 + 2 on two ranks
_claims.equal("sum_of_ranks", measured=total.item(), control=float(accelerator.process_index + 1), expected=3.0)
