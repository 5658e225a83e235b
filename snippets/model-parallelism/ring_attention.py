# Context parallelism with ring attention: each rank holds one chunk of the sequence (its queries,
# keys and values). The key/value chunks travel round the ring of ranks, and each rank merges the
# attention over every chunk with an online softmax, so its output rows equal full attention over the
# whole sequence. Negative control: each rank attends only to its own chunk (no key/value exchange).
# Written by hand with send/recv; Accelerate's context parallelism (FSDP2 on CUDA) uses torch's own.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/model-parallelism/ring_attention.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import math

import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
SEQUENCE, DIM = 8 * world, 16
torch.manual_seed(0)  # every rank knows the full q, k, v only to build the reference
q, k, v = (torch.randn(SEQUENCE, DIM, dtype=torch.float64, device=accelerator.device) for _ in range(3))
full_attention = torch.softmax(q @ k.T / math.sqrt(DIM), dim=-1) @ v
mine = slice(rank * SEQUENCE // world, (rank + 1) * SEQUENCE // world)
q_local, k_block, v_block = q[mine], k[mine].clone(), v[mine].clone()


def pass_along_the_ring(*blocks):
    """Send my blocks to the next rank, receive the previous rank's: one ring step."""
    received = [torch.empty_like(block) for block in blocks]
    ops = [dist.P2POp(dist.isend, block, (rank + 1) % world) for block in blocks]
    ops += [dist.P2POp(dist.irecv, buffer, (rank - 1) % world) for buffer in received]
    for request in dist.batch_isend_irecv(ops):
        request.wait()
    return received


def ring_attention(exchange):
    """Attention of my queries over every key/value block that reaches me, merged with an online softmax."""
    running_max = torch.full((q_local.shape[0], 1), -math.inf, dtype=q.dtype, device=q.device)
    denominator = torch.zeros_like(running_max)
    numerator = torch.zeros_like(q_local)
    keys, values = k_block, v_block
    for step in range(world):
        scores = q_local @ keys.T / math.sqrt(DIM)
        new_max = torch.maximum(running_max, scores.max(dim=-1, keepdim=True).values)
        weights = torch.exp(scores - new_max)
        rescale = torch.exp(running_max - new_max)  # earlier blocks were scaled by an older maximum
        denominator = denominator * rescale + weights.sum(dim=-1, keepdim=True)
        numerator = numerator * rescale + weights @ values
        running_max = new_max
        if step < world - 1:
            keys, values = pass_along_the_ring(keys, values) if exchange else (keys, values)
    return numerator / denominator


ring = ring_attention(exchange=True)
local_only = ring_attention(exchange=False)  # the same loop; the blocks never move
_claims.at_most(
    "ring_attention_equals_full_attention",
    measured=(ring - full_attention[mine]).abs().max().item(),
    control=(local_only - full_attention[mine]).abs().max().item(),
    tolerance=1e-10,
    sequence_per_rank=q_local.shape[0],
    full_sequence=SEQUENCE,
)
