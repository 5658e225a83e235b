# DTensor placements, measured: Shard(0) keeps 1/N of the rows on each rank; redistributing Shard(0)
# to Replicate runs one all-gather (counted with torch's CommDebugMode); a Partial value (each rank
# holds a term of a sum) redistributed to Replicate is the sum on every rank (the all-reduces are
# counted beside it, not judged). Negative controls: a
# Replicate placement of the same tensor, a Replicate-to-Replicate redistribute, and the same local
# values declared Replicate instead of Partial. FSDP2's fully_shard, given no shard_placement_fn, stores
# each parameter as Shard(0); control: a shard_placement_fn choosing the last dim.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/model-parallelism/dtensor_placements.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import torch
from accelerate import Accelerator
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.debug import CommDebugMode

import _claims

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
mesh = init_device_mesh(accelerator.device.type, (world,))
full = torch.arange(4 * world * 4, dtype=torch.float32, device=accelerator.device).reshape(4 * world, 4)

sharded = distribute_tensor(full, mesh, [Shard(0)])
replicated = distribute_tensor(full, mesh, [Replicate()])
_claims.equal(
    "shard_0_keeps_one_nth_of_the_rows",
    measured=sharded.to_local().numel() / full.numel(),
    control=replicated.to_local().numel() / full.numel(),
    expected=1 / world,
    local_shape=list(sharded.to_local().shape),
)


def all_gathers_in(redistribute):
    with CommDebugMode() as comms:
        result = redistribute()
    counts = {str(op): count for op, count in comms.get_comm_counts().items()}
    return sum(count for op, count in counts.items() if "all_gather" in op), result


# Wrapped from each rank's own rows (no distribute_tensor): this part stands on its own.
rows = full.chunk(world)[rank]
gathers, gathered = all_gathers_in(lambda: DTensor.from_local(rows, mesh, [Shard(0)]).redistribute(mesh, [Replicate()]))
no_gathers, _ = all_gathers_in(lambda: DTensor.from_local(full, mesh, [Replicate()]).redistribute(mesh, [Replicate()]))
_claims.equal(
    "shard_to_replicate_is_one_all_gather",
    measured=gathers,
    control=no_gathers,
    expected=1,
    rebuilt_exactly=gathered.to_local().shape == full.shape and bool((gathered.to_local() == full).all()),
)

term = torch.tensor([float(rank + 1)], device=accelerator.device)  # rank r holds the term r + 1
expected_sum = float(sum(r + 1 for r in range(world)))
with CommDebugMode() as reduce_comms:
    as_partial = DTensor.from_local(term, mesh, [Partial()]).redistribute(mesh, [Replicate()]).to_local()
as_replicate = DTensor.from_local(term, mesh, [Replicate()]).redistribute(mesh, [Replicate()]).to_local()
_claims.equal(
    "partial_to_replicate_sums_the_terms",
    measured=abs(as_partial.item() - expected_sum),
    control=abs(as_replicate.item() - expected_sum),
    expected=0.0,
    summed=as_partial.item(),
    all_reduces=sum(n for op, n in reduce_comms.get_comm_counts().items() if "all_reduce" in str(op)),
)


def fsdp2_placements(**options):
    """The placements fully_shard gives each parameter of a Linear(4, 8)."""
    from torch.distributed.fsdp import fully_shard

    layer = torch.nn.Linear(4, 8, device=accelerator.device)
    fully_shard(layer, mesh=mesh, **options)
    return sorted({str(tuple(parameter.placements)) for parameter in layer.parameters()})


_claims.equal(
    "fsdp2_shards_dim_0_by_default",
    measured=fsdp2_placements(),  # shard_placement_fn left out
    control=fsdp2_placements(shard_placement_fn=lambda parameter: Shard(parameter.dim() - 1)),  # the last dim
    expected=["(Shard(dim=0),)"],
)

