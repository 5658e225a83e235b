# What ZeRO++ saves in communication (Wang et al., arXiv:2306.10209), as a model anchored by emulated
# collectives on 2 ranks. ZeRO-3 moves about 3M per step across nodes for a model of M (fp16) bytes: the
# forward all-gather of the weights (M), the backward all-gather again (M), the reduce-scatter of the
# gradients (M). ZeRO++: qwZ all-gathers int8 weights with one scale per block (about 0.5M), hpZ keeps a
# secondary copy of the weights sharded inside each node so the backward all-gather never leaves it (0),
# qgZ sends int4 gradients with per-block scales through an all-to-all and reduces them in full precision
# (about 0.25M).
# Emulated here with real gloo collectives: each rank block-quantizes its fp16 weight shard to int8
# (256 elements per block, an fp32 scale each), all-gathers values and scales, and dequantizes; and
# quantizes its fp16 gradient to packed int4 blocks, all-to-alls the pieces, dequantizes and sums them.
# The bytes are those of the tensors the collectives carried. The cross-node volume model then takes
# those measured byte ratios for qwZ and qgZ and 0 for hpZ's backward all-gather.
# Negative controls: the same all-gather and reduce-scatter of the fp16 tensors (no quantization); one
# scale for each rank's whole shard instead of one per block; the model with the three features off (ZeRO-3).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/sharded-training/zero_plus_plus_volume.py
import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

BLOCK = 256
BLOCKS_PER_SHARD = 64  # 16,384 weights per rank

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
generator = torch.Generator().manual_seed(rank)
# Weights whose magnitude differs from block to block (as layers and channels do): 1e-3 .. 1.
magnitudes = torch.logspace(-3, 0, BLOCKS_PER_SHARD).repeat_interleave(BLOCK)
weights = (torch.randn(BLOCKS_PER_SHARD * BLOCK, generator=generator) * magnitudes).half()


def quantize(values, bits, block):
    """Symmetric quantization with one fp32 scale per `block` elements: (integers, scales)."""
    levels = 2 ** (bits - 1) - 1  # 127 for int8, 7 for int4
    grouped = values.float().reshape(-1, block)
    scales = grouped.abs().amax(dim=1).clamp(min=1e-12) / levels
    integers = torch.round(grouped / scales[:, None]).clamp(-levels, levels).to(torch.int8)
    return integers.reshape(-1), scales


def dequantize(integers, scales, block):
    return (integers.float().reshape(-1, block) * scales[:, None]).reshape(-1)


def pack_int4(integers):
    """Two int4 values per byte (what makes int4 cost a quarter of fp16 on the wire)."""
    unsigned = (integers + 8).to(torch.uint8).reshape(-1, 2)
    return unsigned[:, 0] | (unsigned[:, 1] << 4)


def unpack_int4(packed):
    low, high = (packed & 0x0F).to(torch.int16) - 8, (packed >> 4).to(torch.int16) - 8
    return torch.stack([low, high], dim=1).reshape(-1).to(torch.int8)


def all_gather(tensor):
    out = torch.empty(world * tensor.numel(), dtype=tensor.dtype)
    dist.all_gather_into_tensor(out, tensor)
    return out


# --- qwZ: the forward all-gather of the weights ----------------------------------------------------------
full_fp16 = all_gather(weights)  # ZeRO-3: fp16 shards
fp16_bytes = full_fp16.numel() * full_fp16.element_size()


def quantized_gather(block):
    integers, scales = quantize(weights, bits=8, block=block)
    gathered_integers, gathered_scales = all_gather(integers), all_gather(scales)
    wire = gathered_integers.numel() * gathered_integers.element_size() + gathered_scales.numel() * gathered_scales.element_size()
    return dequantize(gathered_integers, gathered_scales, block), wire


blockwise, blockwise_bytes = quantized_gather(BLOCK)
whole_shard, _ = quantized_gather(weights.numel())  # one scale for each rank's whole shard


def mean_block_relative_error(approximate):
    """Mean over blocks of |error| / |weight|, both as block RMS: small layers count as much as large ones."""
    exact = full_fp16.float().reshape(-1, BLOCK)
    error = (approximate.reshape(-1, BLOCK) - exact).pow(2).mean(dim=1).sqrt()
    return (error / exact.pow(2).mean(dim=1).sqrt()).mean().item()


qwz_ratio = blockwise_bytes / fp16_bytes
_claims.at_most(
    "qwz_all_gather_halves_bytes",
    measured=blockwise_bytes / full_fp16.numel(),  # bytes the int8 all-gathers carried, per weight
    control=fp16_bytes / full_fp16.numel(),  # the same all-gather of the fp16 shards, quantization removed
    tolerance=1.04,
    fp16_bytes=fp16_bytes,
    int8_and_scale_bytes=blockwise_bytes,
)
_claims.at_most(
    "block_scales_keep_small_weights",
    measured=mean_block_relative_error(blockwise),
    control=mean_block_relative_error(whole_shard),  # one scale per shard: small blocks round to zero
    tolerance=0.01,
)

# --- qgZ: the gradient reduce-scatter, replaced by an int4 all-to-all and a full-precision sum -------------
gradient = (torch.randn(world * weights.numel(), generator=generator) * magnitudes.repeat(world)).half()
reference = gradient.float().clone()
dist.all_reduce(reference)
expected_shard = reference.reshape(world, -1)[rank]  # what this rank owns after a reduce-scatter

fp16_shard = torch.empty(weights.numel(), dtype=torch.float16)
dist.reduce_scatter_tensor(fp16_shard, gradient.clone())  # ZeRO-3's reduce-scatter in fp16
reduce_scatter_bytes = gradient.numel() * gradient.element_size()

integers, scales = quantize(gradient, bits=4, block=BLOCK)
packed = pack_int4(integers)
received_packed, received_scales = torch.empty_like(packed), torch.empty_like(scales)
dist.all_to_all_single(received_packed, packed)  # piece j of every rank goes to rank j
dist.all_to_all_single(received_scales, scales)
pieces = dequantize(unpack_int4(received_packed), received_scales, BLOCK).reshape(world, -1)
qgz_shard = pieces.sum(dim=0)  # dequantized before the reduction, summed in fp32
qgz_bytes = packed.numel() * packed.element_size() + scales.numel() * scales.element_size()
qgz_ratio = qgz_bytes / reduce_scatter_bytes
_claims.at_most(
    "qgz_all_to_all_quarter_bytes",
    measured=qgz_bytes / gradient.numel(),  # bytes this rank's all-to-alls carried, per gradient element
    control=reduce_scatter_bytes / gradient.numel(),  # the fp16 reduce-scatter's input, quantization removed
    tolerance=0.53,
    fp16_reduce_scatter_bytes=reduce_scatter_bytes,
    int4_and_scale_bytes=qgz_bytes,
    qgz_relative_error=((qgz_shard - expected_shard).norm() / expected_shard.norm()).item(),
    fp16_reduce_scatter_relative_error=((fp16_shard.float() - expected_shard).norm() / expected_shard.norm()).item(),
)


# --- the cross-node volume per step, in units of M (the model's fp16 bytes) -----------------------------
def cross_node_volume(qwz, hpz, qgz):
    """The paper's accounting: forward all-gather + backward all-gather + gradient reduction, across nodes."""
    forward = qwz_ratio if qwz else 1.0
    backward = 0.0 if hpz else 1.0  # hpZ: the backward all-gather stays inside the node
    gradients = qgz_ratio if qgz else 1.0
    return {"forward": forward, "backward": backward, "gradients": gradients, "total": forward + backward + gradients}


zero3 = cross_node_volume(qwz=False, hpz=False, qgz=False)
zero_pp = cross_node_volume(qwz=True, hpz=True, qgz=True)
_claims.at_most(
    "zero_pp_cross_node_volume_quarter",
    measured=zero_pp["total"],
    control=zero3["total"],  # the same model with the three features off: ZeRO-3
    tolerance=0.78,  # the paper's 0.75 M, plus the scales' 1.6% of the quantized bytes
    zero3_volume_in_m=zero3,
    zero_pp_volume_in_m=zero_pp,
)
