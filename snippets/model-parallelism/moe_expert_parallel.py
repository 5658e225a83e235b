# Expert parallelism in a mixture-of-experts layer: each rank holds ONE expert; a router picks an
# expert per token; an all-to-all sends every token to the rank of its expert, the expert runs there,
# and a second all-to-all brings the results back. Each rank's output equals applying the chosen
# expert to each token locally. Negative control: the same layer with both exchanges left out.
# Slots have a fixed capacity (every expert can take all of a rank's tokens), so nothing is dropped.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/model-parallelism/moe_expert_parallel.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
DIM, TOKENS = 8, 6  # tokens per rank; one expert per rank
torch.manual_seed(0)  # the same router and experts everywhere: each rank USES only its own expert below
router = torch.nn.Linear(DIM, world)
experts = [torch.nn.Linear(DIM, DIM) for _ in range(world)]
tokens = torch.randn(TOKENS, DIM, generator=torch.Generator().manual_seed(10 + rank))


@torch.no_grad()
def moe_layer(exchange):
    choice = router(tokens).argmax(dim=-1)  # the expert of each token
    # One slot of capacity TOKENS per expert: token t, routed to expert e, sits at row e*TOKENS + t.
    send = torch.zeros(world * TOKENS, DIM)
    rows = choice * TOKENS + torch.arange(TOKENS)
    send[rows] = tokens
    received = torch.empty_like(send)
    dist.all_to_all_single(received, send) if exchange else received.copy_(send)
    processed = experts[rank](received)  # my expert, on every token any rank sent it
    returned = torch.empty_like(processed)
    dist.all_to_all_single(returned, processed) if exchange else returned.copy_(processed)
    return returned[rows], choice


with torch.no_grad():
    local_reference = torch.stack([experts[e](token) for token, e in zip(tokens, router(tokens).argmax(dim=-1))])
expert_parallel, choice = moe_layer(exchange=True)
without_exchange, _ = moe_layer(exchange=False)

_claims.at_most(
    "expert_parallel_moe_matches_local_experts",
    measured=(expert_parallel - local_reference).abs().max().item(),
    control=(without_exchange - local_reference).abs().max().item(),
    tolerance=1e-6,
    tokens_per_expert=torch.bincount(choice, minlength=world).tolist(),
)
