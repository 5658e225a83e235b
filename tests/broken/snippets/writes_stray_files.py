# Writes a file by a relative path, as a careless snippet would: it must land in a scratch folder,
# never in the checkout the harness runs from (where docs/ would add a page to the site).
import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
with open(f"stray-file-from-a-snippet-rank{accelerator.process_index}.txt", "w") as stray:
    stray.write("written by tests/broken/snippets/writes_stray_files.py\n")
total = torch.tensor([float(accelerator.process_index + 1)])
dist.all_reduce(total)
_claims.equal("runs_in_scratch", measured=total.item(), control=float(accelerator.process_index + 1), expected=3.0)
