# All-reduce, reduce-scatter and all-gather, measured on real ranks: all_reduce SUMS every rank's
# tensor into every rank; reduce_scatter leaves rank r with chunk r of that sum; all_gather then
# rebuilds the whole sum on every rank, so reduce-scatter + all-gather is an all-reduce.
# Negative controls: the same calls with the reduction (or the gather) taken out.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/collectives/collectives_compose.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
CHUNK = 4  # elements each rank owns after the reduce-scatter


def contribution(of_rank):
    """Rank r's tensor: small integers, so every sum is exact in float32 and any mismatch is a real one."""
    generator = torch.Generator().manual_seed(1000 + of_rank)
    return torch.randint(0, 100, (CHUNK * world,), generator=generator).float().to(accelerator.device)


mine = contribution(rank)
# The reference, built without any collective: every rank can regenerate every rank's tensor.
expected_sum = sum(contribution(r) for r in range(world))

summed = mine.clone()
dist.all_reduce(summed)  # default op: ReduceOp.SUM

averaged = mine.clone()
dist.all_reduce(averaged, op=dist.ReduceOp.AVG)  # the docstring says NCCL only; gloo accepts it on torch 2.13

my_chunk = torch.empty(CHUNK, device=accelerator.device)
# torch 2.13 names: reduce_scatter_single / all_gather_single (reduce_scatter_tensor and
# all_gather_into_tensor are deprecated aliases that call these and warn).
dist.reduce_scatter_single(my_chunk, mine.clone())  # rank r gets chunk r of the sum

rebuilt = torch.empty(CHUNK * world, device=accelerator.device)
dist.all_gather_single(rebuilt, my_chunk)  # every rank gets every chunk

# Controls: the same steps with the reduction removed (my own chunk, not the sum's) ...
unreduced_chunk = mine.chunk(world)[rank].contiguous()
gathered_unreduced = torch.empty(CHUNK * world, device=accelerator.device)
dist.all_gather_single(gathered_unreduced, unreduced_chunk)

_claims.equal(
    "all_reduce_sums",
    measured=(summed - expected_sum).abs().max().item(),
    control=(mine - expected_sum).abs().max().item(),  # no all_reduce: only my own tensor
    expected=0.0,
    world_size=world,
    elements=summed.numel(),
)
_claims.equal(
    "reduce_scatter_leaves_one_chunk_of_the_sum",
    measured=(my_chunk - expected_sum.chunk(world)[rank]).abs().max().item(),
    control=(unreduced_chunk - expected_sum.chunk(world)[rank]).abs().max().item(),
    expected=0.0,
    chunk_elements=my_chunk.numel(),
    full_elements=expected_sum.numel(),
)
_claims.equal(
    "reduce_scatter_then_all_gather_is_all_reduce",
    measured=(rebuilt - summed).abs().max().item(),
    control=(gathered_unreduced - summed).abs().max().item(),  # all_gather alone does not reduce
    expected=0.0,
)
_claims.at_most(
    "avg_op_returns_the_mean",
    measured=(averaged - expected_sum / world).abs().max().item(),
    control=(summed - expected_sum / world).abs().max().item(),  # the default op: a sum, not a mean
    tolerance=1e-4,  # float32 rounding of a division by the world size
    backend=dist.get_backend(),
)
