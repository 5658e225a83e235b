# The handout imports AdamW from transformers. transformers deprecated its own AdamW for years and removed
# it (pull request #36177); with the installed transformers 5.24.0 the import fails (measured only there), and
# torch.optim.AdamW is the one to use.
#   Measured: `from transformers import AdamW` on every process, then building the optimizer with it.
#   Negative control: the same two lines with torch.optim's AdamW.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/end-to-end/transformers_has_no_adamw.py
import torch
import transformers
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
model = torch.nn.Linear(4, 2)


def build_optimizer(import_line):
    """What `exec(import_line)` then `AdamW(model.parameters(), lr=1e-3)` gives: the optimizer's class, or the error."""
    scope = {}
    try:
        exec(import_line, scope)
        optimizer = scope["AdamW"](model.parameters(), lr=1e-3)
        return f"{type(optimizer).__module__}.{type(optimizer).__name__}"
    except ImportError as error:
        return f"ImportError: {error}".split(" (")[0]  # the message without the file path


_claims.equal(
    "transformers_exports_no_adamw",
    measured=build_optimizer("from transformers import AdamW").split(":")[0],
    control=build_optimizer("from torch.optim import AdamW").split(":")[0],
    expected="ImportError",
    transformers=transformers.__version__,
    message=build_optimizer("from transformers import AdamW"),
)
