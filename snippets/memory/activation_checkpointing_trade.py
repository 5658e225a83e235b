# Activation checkpointing trades compute for memory: the checkpointed blocks keep only their inputs
# for backward and run their forward a second time during backward. With dropout inside, the
# recomputation replays the same random mask because checkpoint restores the RNG state (its default:
# the run leaves preserve_rng_state out), so the
# gradients equal those of the plain model. Negative controls: the same model without checkpointing,
# and checkpointing with preserve_rng_state=False.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/memory/activation_checkpointing_trade.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import copy

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.checkpoint import checkpoint

import _claims

BLOCKS, WIDTH, BATCH = 4, 64, 32


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = torch.nn.Linear(WIDTH, 4 * WIDTH), torch.nn.Linear(4 * WIDTH, WIDTH)
        self.dropout = torch.nn.Dropout(0.1)
        self.forward_calls = self.forward_returns = 0

    def forward(self, x):
        self.forward_calls += 1
        out = x + self.down(self.dropout(torch.nn.functional.gelu(self.up(x))))
        self.forward_returns += 1  # not reached by a recomputation that stops early (see the claim's details)
        return out


class Model(torch.nn.Module):
    def __init__(self, use_checkpoint, preserve_rng_state=None):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(BLOCKS))
        self.use_checkpoint, self.preserve_rng_state = use_checkpoint, preserve_rng_state

    def forward(self, x):
        for block in self.blocks:
            if self.use_checkpoint:
                # None leaves preserve_rng_state out, so that the run reads torch's default
                given = {} if self.preserve_rng_state is None else {"preserve_rng_state": self.preserve_rng_state}
                x = checkpoint(block, x, use_reentrant=False, **given)
            else:
                x = block(x)
        return x.pow(2).mean()


accelerator = Accelerator()
set_seed(0)
reference = Model(use_checkpoint=False)
x = torch.randn(BATCH, WIDTH, device=accelerator.device)


def one_step(use_checkpoint, preserve_rng_state=None):
    """Bytes autograd keeps for backward, forward calls and completed forwards per block, and the gradients."""
    model = copy.deepcopy(reference)
    model.use_checkpoint, model.preserve_rng_state = use_checkpoint, preserve_rng_state
    model = accelerator.prepare(model)  # DDP across the ranks, as in training
    kept = []
    # Linear saves its weight for backward too; that memory exists anyway, so it is not counted.
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}

    def pack(tensor):  # every tensor autograd saves for backward outside checkpoint's own hooks
        if tensor.untyped_storage().data_ptr() not in weights:
            kept.append(tensor.numel() * tensor.element_size())
        return tensor

    torch.manual_seed(1)  # the same dropout masks in every variant
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = model(x)
    saved_in_forward = sum(kept)
    accelerator.backward(loss)
    blocks = accelerator.unwrap_model(model).blocks
    grads = torch.cat([p.grad.flatten() for p in model.parameters()])
    calls = sum(b.forward_calls for b in blocks) / BLOCKS
    returns = sum(b.forward_returns for b in blocks) / BLOCKS
    return saved_in_forward, (calls, returns), grads


plain_bytes, (plain_calls, _), plain_grads = one_step(use_checkpoint=False)
ckpt_bytes, (ckpt_calls, ckpt_returns), ckpt_grads = one_step(use_checkpoint=True)
_, _, unseeded_grads = one_step(use_checkpoint=True, preserve_rng_state=False)
inputs_only = BLOCKS * BATCH * WIDTH * 4  # what the blocks' inputs occupy in float32

_claims.at_most(
    "checkpointing_keeps_only_block_inputs",
    measured=ckpt_bytes,
    control=plain_bytes,
    tolerance=2 * inputs_only,
    plain_bytes=plain_bytes,
    block_input_bytes=inputs_only,
    ratio=ckpt_bytes / plain_bytes,
)
_claims.equal(
    "checkpointed_blocks_run_forward_twice",
    measured=ckpt_calls,
    control=plain_calls,
    expected=2.0,
    # Non-reentrant checkpoint stops the rerun once the tensors backward needs are rebuilt (early_stop=True,
    # the default), so the second call need not reach the end of the block.
    completed_forwards_per_block=ckpt_returns,
)
_claims.at_most(
    "checkpointing_keeps_the_gradients",
    measured=(ckpt_grads - plain_grads).abs().max().item(),
    control=(unseeded_grads - plain_grads).abs().max().item(),
    tolerance=1e-6,
)
