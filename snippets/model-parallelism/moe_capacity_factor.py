# What the capacity factor of a Switch (top-1) MoE layer does: transformers' SwitchTransformersSparseMLP,
# built from a config with 4 experts, gives each expert room for
# expert_capacity = capacity_factor * tokens / experts tokens of a sequence; its router masks out the
# tokens beyond that, whose MoE output is then 0, so the layer passes them on by the residual only.
# With expert parallelism on 2 ranks (experts 0-1 on rank 0, 2-3 on rank 1) the router's dispatch mask
# decides what all_to_all_single carries: the tokens counted on the experts' side after the exchange,
# summed over ranks, fall short of all tokens by the dropped ones, for capacity factors 1.0, 1.25, 2.0.
# Negative control: unlimited capacity (a whole sequence per expert), which drops none.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/model-parallelism/moe_capacity_factor.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import math

import torch
import torch.distributed as dist
from accelerate import Accelerator
from transformers import SwitchTransformersConfig
from transformers.models.switch_transformers.modeling_switch_transformers import SwitchTransformersSparseMLP

import _claims

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
EXPERTS, SEQUENCES, LENGTH, WIDTH = 4, 8, 32, 16  # per rank: 8 sequences of 32 tokens
EXPERTS_PER_RANK = EXPERTS // world


def moe_layer(capacity):
    torch.manual_seed(0)  # the same router and experts on every rank
    config = SwitchTransformersConfig(d_model=WIDTH, d_ff=32, num_experts=EXPERTS, expert_capacity=capacity,
                                      dropout_rate=0.0, router_jitter_noise=0.0)
    return SwitchTransformersSparseMLP(config).eval()


tokens = torch.randn(SEQUENCES, LENGTH, WIDTH, generator=torch.Generator().manual_seed(10 + rank))


@torch.no_grad()
def expert_parallel(layer, capacity, exchange=True):
    """Dispatch the router's kept tokens to their expert's rank, run the experts there, bring results back."""
    dispatch, gate, _ = layer.router(tokens)  # one-hot (sequence, token, expert), zero row where dropped
    slot = ((dispatch.cumsum(dim=1) - 1) * dispatch).sum(dim=-1)  # a kept token's place in its expert's buffer
    sequence, position, expert = dispatch.nonzero(as_tuple=True)
    # The router keeps at most `capacity` tokens per expert and sequence, so `capacity` slots suffice; the
    # buffer is sized by what it was really given (agreed over ranks), so a router that kept more still runs.
    slots = torch.tensor(max(capacity, int(slot.max()) + 1 if sequence.numel() else 0))
    dist.all_reduce(slots, op=dist.ReduceOp.MAX)
    # send[destination rank, local expert, sequence, slot] = token features plus a flag column (1 = a real token)
    send = torch.zeros(world, EXPERTS_PER_RANK, SEQUENCES, int(slots), WIDTH + 1)
    where = (expert // EXPERTS_PER_RANK, expert % EXPERTS_PER_RANK, sequence, slot[sequence, position])
    send[where] = torch.cat([tokens[sequence, position], torch.ones(sequence.numel(), 1)], dim=1)
    received = torch.empty_like(send)
    if exchange:
        dist.all_to_all_single(received.view(world, -1), send.view(world, -1))
    else:
        received.copy_(send)
    arrived = received[..., -1].sum()  # real tokens this rank's experts were given, from every rank
    outputs = torch.zeros(world, EXPERTS_PER_RANK, SEQUENCES, int(slots), WIDTH)
    for local in range(EXPERTS_PER_RANK):
        expert = layer.experts[f"expert_{rank * EXPERTS_PER_RANK + local}"]
        outputs[:, local] = expert(received[:, local, ..., :WIDTH]) * received[:, local, ..., -1:]
    returned = torch.empty_like(outputs)
    if exchange:
        dist.all_to_all_single(returned.view(world, -1), outputs.view(world, -1))
    else:
        returned.copy_(outputs)
    combined = torch.zeros_like(tokens)
    combined[sequence, position] = returned[where] * gate[sequence, position]
    return combined, arrived, dispatch


def dropped_fraction(capacity):
    """Share of all ranks' tokens that no expert received, counted on the experts' side of the exchange."""
    _, arrived, _ = expert_parallel(moe_layer(capacity), capacity)
    dist.all_reduce(arrived)
    return 1 - arrived.item() / (world * SEQUENCES * LENGTH)


def capacity_for(factor):
    return math.ceil(factor * LENGTH / EXPERTS)  # Switch: tokens per batch / experts x capacity factor


UNLIMITED = LENGTH  # every token of a sequence fits in one expert
fractions = {factor: dropped_fraction(capacity_for(factor)) for factor in (1.0, 1.25, 2.0)}
unlimited_fraction = dropped_fraction(UNLIMITED)

_claims.at_least(
    "capacity_factor_one_drops_tokens",
    measured=fractions[1.0],
    control=unlimited_fraction,
    bound=0.05,
    dropped_fraction_by_capacity_factor=fractions,
    capacity_by_factor={factor: capacity_for(factor) for factor in fractions},
    tokens_per_rank=SEQUENCES * LENGTH,
)
_claims.at_most(
    "capacity_factor_two_drops_few",
    measured=fractions[2.0],
    control=fractions[1.0],  # the same layer with half that capacity
    tolerance=0.02,
)

# Dropped tokens get no expert output: the sparse MLP returns exactly 0 for them (the layer adds the residual).
tight, roomy = moe_layer(capacity_for(1.0)), moe_layer(UNLIMITED)
with torch.no_grad():
    dispatch, _, _ = tight.router(tokens)
    dropped = dispatch.sum(dim=-1) == 0
    output_tight, output_roomy = tight(tokens), roomy(tokens)
    chosen = roomy.router(tokens)[0].argmax(dim=-1)  # each token's expert, before any capacity mask
    earlier_kept = [
        (dispatch[s, :t, chosen[s, t]].sum() == capacity_for(1.0)).item() for s, t in dropped.nonzero().tolist()
    ]
_claims.at_most(
    "dropped_tokens_get_no_expert_output",
    # judged together: 0 from the MoE, and dropped only because earlier tokens had filled the expert
    # (a layer that drops nothing has no dropped token to show this: inf, which fails)
    measured=output_tight[dropped].abs().max().item() if dropped.any() and all(earlier_kept) else float("inf"),
    control=output_roomy[dropped].abs().max().item() if dropped.any() else float("inf"),  # the same tokens, with room
    tolerance=0.0,
    dropped_tokens_on_this_rank=int(dropped.sum()),
    every_dropped_token_came_after_a_full_expert=all(earlier_kept),
)

# Expert parallelism changes where the experts run, not which tokens are dropped or what the kept ones get.
parallel, _, _ = expert_parallel(tight, capacity_for(1.0))
local_only, _, _ = expert_parallel(tight, capacity_for(1.0), exchange=False)
_claims.at_most(
    "expert_parallel_matches_local_layer",
    measured=(parallel - output_tight).abs().max().item(),
    control=(local_only - output_tight).abs().max().item(),
    tolerance=1e-6,
)
