# Broken on purpose: rank 0 waits for a message that rank 1 never sends.
import torch
import torch.distributed as dist
from accelerate import Accelerator

accelerator = Accelerator()
if accelerator.process_index == 0:
    dist.recv(torch.zeros(1), src=1)
