# N1: controls that measured nothing (None, NaN, an error's text against a number) must fail the claim,
# named; a control that legitimately finds nothing reports a sentinel of the bound's kind.
import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
total = torch.tensor([float(accelerator.process_index + 1)])
dist.all_reduce(total)  # 1 + 2 on two ranks


def crashed_control():
    try:
        raise RuntimeError("the control's path crashed")
    except RuntimeError as error:
        return f"{type(error).__name__}: {error}"


_claims.equal("control_none", measured=total.item(), control=None, expected=3.0)
_claims.at_most("control_nan", measured=0.0, control=float("nan"), tolerance=0.5)
_claims.equal("control_text_against_a_number", measured=total.item(), control=crashed_control(), expected=3.0)
_claims.equal("control_sentinel_of_the_bounds_kind", measured="ChildFailedError", control="no exception",
              expected="ChildFailedError")
