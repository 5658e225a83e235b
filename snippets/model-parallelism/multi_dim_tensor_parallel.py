# 1D (Megatron) against 2D (SUMMA) tensor parallelism: what each device holds of one linear layer Y = X A.
# Measured on 2 ranks with torch's DTensor 1D plan (ColwiseParallel then RowwiseParallel): the weights are split
# 1/P, but the layer's input and output stay whole on every rank. Modelled: 2D SUMMA on a q x q grid (q = 2,
# 4 virtual devices in this process): each device holds one block (1/q^2) of X, A and Y, and q broadcast steps
# rebuild X A. Negative controls: the 1D plan with the second layer's output reduce-scattered instead of
# all-reduced; the SUMMA run with its last step left out.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/model-parallelism/multi_dim_tensor_parallel.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import copy

import torch
from accelerate import Accelerator
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_module
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import _claims

accelerator = Accelerator()
P = accelerator.num_processes
mesh = init_device_mesh(accelerator.device.type, (P,))
torch.manual_seed(0)
hidden = 48
mlp = torch.nn.Sequential(torch.nn.Linear(hidden, 4 * hidden), torch.nn.GELU(), torch.nn.Linear(4 * hidden, hidden))
tokens = torch.randn(32, hidden)  # b*s tokens of one micro-batch


def weight_share(module):
    local = sum(p.to_local().numel() if hasattr(p, "to_local") else p.numel() for p in module.parameters() if p.dim() == 2)
    return local / sum(p.numel() for p in mlp.parameters() if p.dim() == 2)


one_d = parallelize_module(copy.deepcopy(mlp), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
_claims.at_most(
    "one_d_splits_the_weights",
    measured=weight_share(one_d),
    control=weight_share(distribute_module(copy.deepcopy(mlp), mesh)),  # every parameter replicated
    tolerance=1.0 / P,
    processes=P,
)


def output_share(output_layout):
    plan = {"0": ColwiseParallel(), "2": RowwiseParallel(output_layouts=output_layout)}
    with torch.no_grad():
        out = parallelize_module(copy.deepcopy(mlp), mesh, plan)(tokens)
    out = out.to_local() if hasattr(out, "to_local") else out
    return out.numel() / (tokens.shape[0] * hidden)


_claims.at_least(
    "one_d_keeps_whole_activations",
    measured=output_share(None),  # RowwiseParallel's own output layout: replicated by the all-reduce
    control=output_share(Shard(0)),  # the same layer reduce-scattering its output over the tokens
    bound=1.0,
)


def summa(x, a, q, steps=None):
    """2D SUMMA on a q x q grid of virtual devices: device (i, j) owns blocks X[i][j], A[i][j], Y[i][j]; in
    step k, X[i][k] is broadcast along row i and A[k][j] down column j, and each device adds their product."""
    xb = [list(row.chunk(q, dim=1)) for row in x.chunk(q, dim=0)]
    ab = [list(row.chunk(q, dim=1)) for row in a.chunk(q, dim=0)]
    y = [[torch.zeros(xb[i][0].shape[0], ab[0][j].shape[1]) for j in range(q)] for i in range(q)]
    received = [[0] * q for _ in range(q)]  # elements each device receives in the broadcasts
    for k in range(q if steps is None else steps):
        for i in range(q):
            for j in range(q):
                y[i][j] += xb[i][k] @ ab[k][j]
                received[i][j] += (xb[i][k].numel() if j != k else 0) + (ab[k][j].numel() if i != k else 0)
    return torch.cat([torch.cat(row, dim=1) for row in y], dim=0), received


q = 2
weight = mlp[0].weight.detach().T.contiguous()  # A of Y = X A, hidden x 4 hidden
dense = tokens @ weight
summa_y, received = summa(tokens, weight, q)
_claims.at_most(
    "summa_2d_matches_the_dense_product",
    measured=(summa_y - dense).abs().max().item(),
    control=(summa(tokens, weight, q, steps=q - 1)[0] - dense).abs().max().item(),  # its last step left out
    tolerance=1e-5,
    elements_received_per_device=received,
)
