# Tensor parallelism splits each weight matrix across ranks: the first Linear by output columns
# (ColwiseParallel), the second by input rows (RowwiseParallel), so the hidden activation stays
# sharded and ONE all-reduce of the second layer's partial sums rebuilds the dense output.
# Negative controls: the same parallelized MLP with that all-reduce removed (output left Partial); for
# the weights' share, the same model distributed over the mesh with every parameter replicated.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/model-parallelism/tensor_parallel_mlp.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import copy

import torch
from accelerate import Accelerator
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Partial, distribute_module
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import _claims

accelerator = Accelerator()
world = accelerator.num_processes
mesh = init_device_mesh(accelerator.device.type, (world,))  # one dimension: every rank is a TP rank
torch.manual_seed(0)  # the same dense weights and inputs on every rank
# 24 hidden units divide evenly over 2, 3 or 4 ranks (16 over 3 ranks crashed in the row-parallel matmul).
dense = torch.nn.Sequential(torch.nn.Linear(8, 24), torch.nn.ReLU(), torch.nn.Linear(24, 4)).to(accelerator.device)
x = torch.randn(5, 8, device=accelerator.device)

tensor_parallel = parallelize_module(copy.deepcopy(dense), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
# Control: the same plan, but the second layer's output stays a partial sum (no all-reduce).
no_all_reduce = parallelize_module(
    copy.deepcopy(dense), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel(output_layouts=Partial())}
)
# Control for the weights' share: the same model distributed over the same mesh as DTensors, but with
# distribute_module's default partition (every parameter Replicate) instead of the Colwise/Rowwise shards.
replicated = distribute_module(copy.deepcopy(dense), mesh)

dense_out, tp_out, partial_out = dense(x), tensor_parallel(x), no_all_reduce(x)
for model, out in ((dense, dense_out), (tensor_parallel, tp_out), (no_all_reduce, partial_out)):
    out.pow(2).sum().backward()


def local_fraction(model):
    """The share of the two weight matrices' elements that this rank stores."""
    weights = [model[0].weight, model[2].weight]
    local = sum(w.to_local().numel() if hasattr(w, "to_local") else w.numel() for w in weights)
    return local / sum(w.numel() for w in weights)


def gradient_gap(model):
    """Largest difference between the (sharded) first-layer weight gradient and the dense one."""
    grad = model[0].weight.grad
    return (grad.full_tensor() - dense[0].weight.grad).abs().max().item()


_claims.at_most(
    "tensor_parallel_output_matches_dense",
    measured=(tp_out - dense_out).abs().max().item(),
    control=(partial_out - dense_out).abs().max().item(),
    tolerance=1e-6,
    world_size=world,
)
_claims.equal(
    "each_rank_stores_its_share_of_the_weights",
    measured=local_fraction(tensor_parallel),
    control=local_fraction(replicated),
    expected=1 / world,
    first_layer_local_shape=list(tensor_parallel[0].weight.to_local().shape),
    second_layer_local_shape=list(tensor_parallel[2].weight.to_local().shape),
    control_placements=[str(replicated[0].weight.placements), str(replicated[2].weight.placements)],
)
_claims.at_most(
    "tensor_parallel_gradients_match_dense",
    measured=gradient_gap(tensor_parallel),
    control=gradient_gap(no_all_reduce),
    tolerance=1e-6,
)
