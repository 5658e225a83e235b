# Linear(4, 1) with unit weights and no bias, on a row of ones: 4. The control is a layer with zero weights.
import torch

import _claims

layer = torch.nn.Linear(4, 1, bias=False)
torch.nn.init.ones_(layer.weight)
blank = torch.nn.Linear(4, 1, bias=False)
torch.nn.init.zeros_(blank.weight)
with torch.no_grad():
    _claims.equal("linear_of_ones", measured=layer(torch.ones(1, 4)).item(), control=blank(torch.ones(1, 4)).item(),
                  expected=4.0)
