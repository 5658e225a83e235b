# Megatron's scatter/gather optimisation (Narayanan et al. 2021, section 4.1): a row-parallel layer's
# all-reduce leaves the SAME output on every tensor-parallel rank, so sending it whole from each TP rank to
# its peer in the next pipeline stage sends t identical copies. Instead each rank sends 1/t of it and the
# receiving TP group all-gathers the full tensor. Here the 2 ranks form one TP group (t = 2); the split and
# the all-gather are real DTensor redistributions on gloo, the inter-stage send between the two groups is
# not run (both stages would live on these 2 ranks). Negative controls: the same layer with its output left
# Partial (no all-reduce); the receiver without the all-gather; the same redistribution to Replicate (no split).
# A model then prices one stage boundary of GPT-3 (t = 8) over the paper's 200 Gb/s InfiniBand cards.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/model-parallelism/pipeline_tp_scatter_gather.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import copy

import torch
import torch.distributed as dist
from accelerate import Accelerator
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import _claims

accelerator = Accelerator()
t = accelerator.num_processes  # the tensor-parallel size
mesh = init_device_mesh(accelerator.device.type, (t,))
torch.manual_seed(0)  # the same dense MLP and micro-batch on every rank
hidden = 48  # divisible by 2, 3 and 4 ranks
mlp = torch.nn.Sequential(torch.nn.Linear(hidden, 4 * hidden), torch.nn.GELU(), torch.nn.Linear(4 * hidden, hidden))
micro_batch = torch.randn(2, 16, hidden)  # b, s, h


def stage_output(output_layout):
    plan = {"0": ColwiseParallel(), "2": RowwiseParallel(output_layouts=output_layout, use_local_output=False)}
    with torch.no_grad():
        return parallelize_module(copy.deepcopy(mlp), mesh, plan)(micro_batch)


def spread_across_ranks(local):
    """Largest difference between this rank's tensor and any other rank's."""
    everyone = [torch.empty_like(local) for _ in range(t)]
    dist.all_gather(everyone, local.contiguous())
    return max((other - local).abs().max().item() for other in everyone)


replicated = stage_output(Replicate())  # Megatron's g: the all-reduce after the row-parallel layer
_claims.at_most(
    "tp_ranks_hold_the_same_output",
    measured=spread_across_ranks(replicated.to_local()),
    control=spread_across_ranks(stage_output(Partial()).to_local()),  # the partial sums, before the all-reduce
    tolerance=0.0,
    tensor_parallel_size=t,
)

full = replicated.to_local()
sent_chunk = replicated.redistribute(mesh, [Shard(-1)]).to_local()  # what this rank sends over its own link
# without the optimisation: the same redistribution, to Replicate() (no split), so each TP rank sends its whole copy
unsplit = replicated.redistribute(mesh, [Replicate()]).to_local()
_claims.at_most(
    "each_rank_sends_one_t_of_the_bytes",
    measured=sent_chunk.numel() * sent_chunk.element_size() / (full.numel() * full.element_size()),
    control=unsplit.numel() * unsplit.element_size() / (full.numel() * full.element_size()),
    tolerance=1.0 / t,
    bytes_sent_per_rank=sent_chunk.numel() * sent_chunk.element_size(),
    bytes_of_the_activation=full.numel() * full.element_size(),
)


def share_rebuilt(received):
    """Share of the full activation's elements this receiving rank holds with the right value."""
    if received.shape == full.shape:
        return (received == full).float().mean().item()
    width = received.shape[-1]
    if width * t != full.shape[-1]:
        return 0.0  # neither the full activation nor one chunk of it
    padded = torch.zeros_like(full)  # only its own chunk, in its place
    rank = dist.get_rank()
    padded[..., rank * width : (rank + 1) * width] = received
    return (padded == full).float().mean().item()


arrived = DTensor.from_local(sent_chunk.clone(), mesh, [Shard(-1)])  # each receiving rank has its peer's chunk
_claims.at_least(
    "all_gather_rebuilds_the_full_activation",
    measured=share_rebuilt(arrived.redistribute(mesh, [Replicate()]).to_local()),  # the all-gather
    control=share_rebuilt(arrived.to_local()),  # the receiver without the all-gather: its chunk only
    bound=1.0,
)


def boundary_milliseconds(b, s, h, tp, scatter_gather, bytes_per_element=2, link_gbit=200):
    """One direction of one stage boundary for one micro-batch, each TP pair on its own InfiniBand card at
    link_gbit Gb/s, all pairs in parallel: without the optimisation every pair sends b*s*h elements, with it
    b*s*h/tp (the NVLink all-gather that follows is not priced)."""
    elements = b * s * h / tp if scatter_gather else b * s * h
    return elements * bytes_per_element / (link_gbit / 8 * 1e9) * 1e3


gpt3 = dict(b=1, s=2048, h=12288, tp=8)  # GPT-3 175B: hidden 12288, sequence 2048; micro-batch 1, t = 8
_claims.at_most(
    "gpt3_boundary_time_falls_eightfold",
    measured=boundary_milliseconds(**gpt3, scatter_gather=True),
    control=boundary_milliseconds(**gpt3, scatter_gather=False),
    tolerance=0.3,
    megabytes_per_pair_unsplit=2048 * 12288 * 2 / 1e6,
    megabytes_per_pair_split=2048 * 12288 * 2 / 8 / 1e6,
    megabytes_over_infiniband_unsplit_all_pairs=8 * 2048 * 12288 * 2 / 1e6,
)
