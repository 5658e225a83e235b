# Sequence parallelism (Megatron's, torch's SequenceParallel) paired with tensor parallelism: the
# LayerNorm region of a block runs on each rank's slice of the SEQUENCE instead of on a full replicated
# copy, and the block's one all-reduce becomes an all-gather (sequence shards -> full sequence, before
# the column-parallel Linear) plus a reduce-scatter (partial sums -> sequence shards, after the
# row-parallel Linear). Counted with torch's CommDebugMode.
# Negative controls: the same block parallelized without SequenceParallel (plain TP: the row-parallel
# output is all-reduced); for the norm's memory, two such blocks fed the same x under either plan,
# where the second norm gets the first block's reduce-scatter (SP) or all-reduce (plain TP) output;
# and, for the output, the same SP plan with the row-parallel output left as a partial sum.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/model-parallelism/sequence_parallel_norm_region.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import copy

import torch
from accelerate import Accelerator
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel, parallelize_module

import _claims

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
mesh = init_device_mesh(accelerator.device.type, (world,))
torch.manual_seed(0)  # the same dense block and input on every rank
dense = torch.nn.Sequential(
    torch.nn.LayerNorm(8), torch.nn.Linear(8, 24), torch.nn.ReLU(), torch.nn.Linear(24, 8)
).to(accelerator.device)
x = torch.randn(2, 6 * world, 8, device=accelerator.device)  # (batch, sequence, hidden)
my_tokens = x.chunk(world, dim=1)[rank]  # this rank's slice of the sequence


def sequence_parallel_plan(down_output):
    return {
        "0": SequenceParallel(),  # LayerNorm on this rank's tokens; output a DTensor Shard(1)
        "1": ColwiseParallel(input_layouts=Shard(1)),  # all-gather the sequence, then split the columns
        "3": RowwiseParallel(output_layouts=down_output),  # partial sums -> reduce-scatter onto the sequence
    }


sp_block = parallelize_module(copy.deepcopy(dense), mesh, sequence_parallel_plan(Shard(1)))
tp_block = parallelize_module(copy.deepcopy(dense), mesh, {"1": ColwiseParallel(), "3": RowwiseParallel()})
# Control for the output: the SP plan whose row-parallel output stays a partial sum (no reduce-scatter).
sp_no_reduce = parallelize_module(copy.deepcopy(dense), mesh, sequence_parallel_plan(Partial()))

# For the memory claim, two such blocks in a row, both fed the same full x: the second block's norm
# gets what the library hands it, the first block's reduce-scatter (SP) or all-reduce (plain TP).
two_blocks = torch.nn.Sequential(copy.deepcopy(dense), copy.deepcopy(dense))
sp_plan = {f"{i}.{name}": style for i in (0, 1) for name, style in sequence_parallel_plan(Shard(1)).items()}
tp_plan = {f"{i}.{name}": style for i in (0, 1) for name, style in (("1", ColwiseParallel()), ("3", RowwiseParallel()))}
sp_chain = parallelize_module(copy.deepcopy(two_blocks), mesh, sp_plan)
tp_chain = parallelize_module(copy.deepcopy(two_blocks), mesh, tp_plan)

norm_outputs = {}
for name, chain in (("sp", sp_chain), ("tp", tp_chain)):
    chain[1][0].register_forward_hook(lambda mod, inp, out, name=name: norm_outputs.__setitem__(name, out))


def counts(run):
    """Collectives in one forward, by kind, as CommDebugMode counts them."""
    with CommDebugMode() as comms:
        out = run()
    by_name = {str(op).split(".")[-1]: n for op, n in comms.get_comm_counts().items()}
    kinds = {
        kind: sum(n for op, n in by_name.items() if kind in op) for kind in ("all_gather", "reduce_scatter", "all_reduce")
    }
    return out, kinds, by_name


with torch.no_grad():
    dense_out = dense(x)
    sp_out, sp_counts, sp_ops = counts(lambda: sp_block(my_tokens))  # each rank feeds only its tokens
    tp_out, tp_counts, tp_ops = counts(lambda: tp_block(x))  # plain TP: every rank feeds the whole sequence
    partial_out = sp_no_reduce(my_tokens)
    sp_chain(DTensor.from_local(x, mesh, [Replicate()], run_check=False))  # the whole x, replicated
    tp_chain(x)


def local(t):
    return t.to_local() if isinstance(t, DTensor) else t


def gap_to_my_tokens(out):
    """Largest difference between this rank's output and the dense output on this rank's tokens."""
    out, want = local(out), dense_out.chunk(world, dim=1)[rank]
    return (out - want).abs().max().item() if out.shape == want.shape else float("inf")


_claims.at_most(
    "sequence_parallel_block_matches_dense",
    measured=gap_to_my_tokens(sp_out),
    control=gap_to_my_tokens(local(partial_out).chunk(world, dim=1)[rank]),
    tolerance=1e-6,
    output_local_shape=list(local(sp_out).shape),
    plain_tp_gap=(local(tp_out) - dense_out).abs().max().item(),
)
_claims.equal(
    "all_reduce_becomes_all_gather_plus_reduce_scatter",
    measured=[sp_counts["all_gather"], sp_counts["reduce_scatter"], sp_counts["all_reduce"]],
    control=[tp_counts["all_gather"], tp_counts["reduce_scatter"], tp_counts["all_reduce"]],
    expected=[1, 1, 0],
    order="[all_gather, reduce_scatter, all_reduce] in one forward",
    sequence_parallel_ops=sp_ops,
    plain_tp_ops=tp_ops,
)
_claims.equal(
    "norm_region_holds_one_nth_of_the_activations",
    measured=local(norm_outputs["sp"]).numel() / x.numel(),
    control=local(norm_outputs["tp"]).numel() / x.numel(),
    expected=1 / world,
    sp_norm_local_shape=list(local(norm_outputs["sp"]).shape),
    tp_norm_local_shape=list(local(norm_outputs["tp"]).shape),
)
