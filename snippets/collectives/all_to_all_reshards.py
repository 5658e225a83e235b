# all_to_all: rank r sends its j-th chunk to rank j and receives chunk r from every rank. That turns a
# tensor sharded by rows (sequence) into one sharded by columns (heads): the exchange behind
# DeepSpeed-Ulysses sequence parallelism and behind routing tokens to experts in MoE.
# Negative control: the same reshaping with the exchange left out.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/collectives/all_to_all_reshards.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
SEQUENCE, HEADS = 4 * world, 2 * world  # rows and columns of the full activation
full = torch.arange(SEQUENCE * HEADS, dtype=torch.float32, device=accelerator.device).reshape(SEQUENCE, HEADS)
rows = full.chunk(world, dim=0)[rank]  # what this rank holds: its share of the sequence, every head

# To rank j goes the block of my rows that lies in j's columns; blocks travel as one flat buffer.
send = torch.cat([block.reshape(-1) for block in rows.chunk(world, dim=1)])
received = torch.empty_like(send)
dist.all_to_all_single(received, send)
# From every rank i comes its rows, restricted to my columns: stacked, they are my column shard.
columns = torch.cat(received.chunk(world), dim=0).reshape(SEQUENCE, HEADS // world)
unexchanged = torch.cat(send.chunk(world), dim=0).reshape(SEQUENCE, HEADS // world)

target = full.chunk(world, dim=1)[rank]  # every row, this rank's heads
_claims.equal(
    "all_to_all_turns_row_shards_into_column_shards",
    measured=(columns - target).abs().max().item(),
    control=(unexchanged - target).abs().max().item(),
    expected=0.0,
    local_shape_before=list(rows.shape),
    local_shape_after=list(columns.shape),
)
