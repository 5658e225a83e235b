# Broken on purpose: rank 1 raises while rank 0 waits in a collective that rank 1 will never join.
import torch
import torch.distributed as dist
from accelerate import Accelerator

accelerator = Accelerator()
if accelerator.process_index == 1:
    raise ValueError("rank 1 fails on purpose")
dist.all_reduce(torch.ones(1))
