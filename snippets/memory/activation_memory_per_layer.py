# How much activation memory does a transformer layer keep for backward? Korthikanti et al. (2022),
# section 4.1: sbh(34 + 5as/h) bytes per layer with 16-bit activations and 1-byte dropout masks.
# A GPT-style layer built from a small config (two LayerNorms, attention with dropout on the scores,
# a 4h GeLU MLP, dropout after each block) runs forward in bf16 under
# torch.autograd.graph.saved_tensors_hooks, which sees every tensor autograd keeps for backward; the
# bytes of the distinct storages it keeps (parameters and per-token LayerNorm statistics left out, as
# the paper leaves them out) are compared with the formula. Negative control: the same layer under
# activation checkpointing, which keeps nothing inside the layer. Selective recomputation
# (checkpointing only the attention core) must keep 34·sbh, the formula without its 5as²b term. With
# tensor parallelism on 2 ranks (heads and MLP columns split) each rank must keep sbh(10 + 24/t + 5as/(ht)).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/memory/activation_memory_per_layer.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torch.utils.checkpoint
from accelerate import Accelerator
from torch import nn

import _claims

accelerator = Accelerator()
world = accelerator.num_processes


@dataclass
class LayerConfig:
    hidden: int = 64  # h
    heads: int = 4  # a
    sequence: int = 32  # s
    batch: int = 2  # b
    dropout: float = 0.1


class AllReduceForward(torch.autograd.Function):
    """Megatron's f-bar: all-reduce in forward, identity in backward (keeps nothing for backward)."""

    @staticmethod
    def forward(ctx, partial):
        total = partial.clone()
        dist.all_reduce(total)
        return total

    @staticmethod
    def backward(ctx, grad):
        return grad


class TransformerLayer(nn.Module):
    """The layer of the paper's Figure 2, with `tensor_parallel` ranks sharing the heads and the MLP columns."""

    def __init__(self, config, tensor_parallel=1, recompute_attention_core=False, fused_dropout=True):
        super().__init__()
        self.fused_dropout = fused_dropout
        h, t = config.hidden, tensor_parallel
        self.config, self.t, self.recompute_attention_core = config, t, recompute_attention_core
        self.local_heads = config.heads // t
        self.norm1, self.norm2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.query, self.key, self.value = (nn.Linear(h, h // t) for _ in range(3))
        # the row-parallel layers' bias is added once, after the all-reduce would sum it t times: left out when split
        self.out = nn.Linear(h // t, h, bias=t == 1)
        self.up, self.down = nn.Linear(h, 4 * h // t), nn.Linear(4 * h // t, h, bias=t == 1)

    def split_heads(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.local_heads, -1).transpose(1, 2).reshape(b * self.local_heads, s, -1)

    def dropout(self, x):
        if self.fused_dropout:  # what F.dropout runs on CUDA: torch.native_dropout, which keeps a bool mask
            return torch.native_dropout(x, self.config.dropout, self.training)[0]
        return F.dropout(x, self.config.dropout, self.training)  # on CPU: input * noise, noise in x's dtype

    def attention_core(self, q, k, v):
        scores = torch.bmm(q, k.transpose(1, 2)) * q.shape[-1] ** -0.5
        probabilities = self.dropout(torch.softmax(scores, dim=-1))
        return torch.bmm(probabilities, v)

    def reduce(self, partial):
        return AllReduceForward.apply(partial) if self.t > 1 else partial

    def forward(self, x):
        b, s, h = x.shape
        y = self.norm1(x)
        q, k, v = (self.split_heads(projection(y)) for projection in (self.query, self.key, self.value))
        if self.recompute_attention_core:
            # use_reentrant=True saves the core's inputs (Q, K, V) through save_for_backward, where the hooks see them
            context = torch.utils.checkpoint.checkpoint(self.attention_core, q, k, v, use_reentrant=True)
        else:
            context = self.attention_core(q, k, v)
        context = context.view(b, self.local_heads, s, -1).transpose(1, 2).reshape(b, s, h // self.t)
        x = x + self.dropout(self.reduce(self.out(context)))
        hidden = F.gelu(self.up(self.norm2(x)))
        return x + self.dropout(self.reduce(self.down(hidden)))


def saved_bytes(layer, x, checkpoint_whole_layer=False):
    """Bytes of the distinct storages autograd keeps for backward in one forward of `layer`."""
    parameters = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    small = x.shape[0] * x.shape[1]  # a tensor of one number per token (LayerNorm mean, rstd): ignored, as in the paper
    kept = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters and tensor.numel() > small:
            kept[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        if checkpoint_whole_layer:
            out = torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False)
        else:
            out = layer(x)
    out.float().sum().backward()  # the graph is complete: backward runs on what was kept
    return sum(kept.values())


config = LayerConfig()
s, b, h, a = config.sequence, config.batch, config.hidden, config.heads
sbh = s * b * h
torch.manual_seed(0)


def fresh_input():
    return torch.randn(b, s, h, dtype=torch.bfloat16, requires_grad=True)


def layer(**options):
    torch.manual_seed(0)
    return TransformerLayer(config, **options).to(torch.bfloat16).train()


full_formula = sbh * (34 + 5 * a * s / h)  # bytes, Korthikanti et al. equation 1
stored = saved_bytes(layer(), fresh_input())
checkpointed = saved_bytes(layer(), fresh_input(), checkpoint_whole_layer=True)
_claims.at_most(
    "layer_keeps_sbh_34_plus_5as_over_h",
    measured=abs(stored / full_formula - 1),
    control=abs(checkpointed / full_formula - 1),
    tolerance=0.0,
    saved_bytes=stored,
    formula_bytes=full_formula,
    checkpointed_layer_bytes=checkpointed,
    s=s, b=b, h=h, a=a,
)

selective = saved_bytes(layer(recompute_attention_core=True), fresh_input())
_claims.equal(
    "selective_recomputation_keeps_34_sbh",
    measured=selective / sbh,
    control=stored / sbh,  # the same layer with its attention core stored, not recomputed
    expected=34,
    selective_bytes=selective,
    attention_core_bytes_dropped=stored - selective,
    five_a_s2_b=5 * a * s * s * b,
)

# torch's F.dropout on CPU keeps its noise tensor in the activation's dtype (2 bytes) instead of a 1-byte mask:
# the same layer then keeps one more byte per masked element, sbh(36 + 6as/h).
unfused = saved_bytes(layer(fused_dropout=False), fresh_input())
_claims.equal(
    "cpu_dropout_keeps_two_byte_masks",
    measured=unfused / sbh,
    control=stored / sbh,  # the same layer with torch.native_dropout's bool masks
    expected=36 + 6 * a * s / h,
    unfused_bytes=unfused,
)

tensor_parallel_formula = sbh * (10 + 24 / world + 5 * a * s / (h * world))  # equation 2, t = world
sharded = saved_bytes(layer(tensor_parallel=world), fresh_input())
_claims.at_most(
    "tensor_parallel_rank_keeps_equation_2",
    measured=abs(sharded / tensor_parallel_formula - 1),
    control=abs(stored / tensor_parallel_formula - 1),  # the unsplit layer on one rank
    tolerance=0.0,
    tensor_parallel=world,
    rank_bytes=sharded,
    formula_bytes=tensor_parallel_formula,
    replicated_part_bytes=10 * sbh,
)
