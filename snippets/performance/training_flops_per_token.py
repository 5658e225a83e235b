# How many FLOPs does training a transformer cost per token? About 6N for N parameters: 2N in the
# forward (one multiply-add per parameter per token) and 4N in the backward (gradients for the inputs
# and for the weights). Counted with torch's FlopCounterMode on a tiny GPT-2 built from a config.
# Negative control: the forward alone, about 2N.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/performance/training_flops_per_token.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.flop_counter import FlopCounterMode
from transformers import GPT2Config, GPT2LMHeadModel

import _claims

accelerator = Accelerator()
set_seed(0)
config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=256, n_positions=64)
model = accelerator.prepare(GPT2LMHeadModel(config))
parameters = sum(p.numel() for p in model.parameters())
tokens = torch.randint(0, config.vocab_size, (4, 32), device=accelerator.device)


def flops_per_token_per_parameter(train):
    with FlopCounterMode(display=False) as counter:
        loss = model(tokens, labels=tokens).loss
        if train:
            accelerator.backward(loss)
    return counter.get_total_flops() / tokens.numel() / parameters


_claims.between(
    "training_costs_about_6_flops_per_parameter_per_token",
    measured=flops_per_token_per_parameter(train=True),
    control=flops_per_token_per_parameter(train=False),
    low=5.5,
    high=7.0,
    parameters=parameters,
    tokens=tokens.numel(),
)
