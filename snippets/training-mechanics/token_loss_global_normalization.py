# Normalising a token-level loss across gradient accumulation and ranks. 2 ranks x 2 micro-batches of
# padded sequences with 11, 3 (rank 0) and 4, 12 (rank 1) real tokens: 30 in all. The reference is ONE
# process computing the mean cross-entropy over all 30 tokens.
#   * Right: every micro-batch returns its SUM of token losses divided by the GLOBAL token count (30,
#     summed over the micro-batches of the window and all-reduced over ranks with accelerator.reduce),
#     times num_processes x gradient_accumulation_steps, because DDP averages gradients over ranks and
#     accelerator.backward divides by the accumulation steps. The gradient matches the reference.
#   * Wrong: the mean of each micro-batch (what F.cross_entropy returns by default) averaged over
#     micro-batches and ranks: a mean of means, which gives a token of a short micro-batch more weight.
#   * Also wrong: dividing by this rank's own token count (14 on rank 0, 16 on rank 1) without the reduce.
# Negative controls: the mean of per-micro-batch means; the local token count.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/training-mechanics/token_loss_global_normalization.py
import copy

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import set_seed

import _claims

IGNORE, VOCAB, DIM, MAX_LEN = -100, 6, 4, 6
ACCUMULATION = 2
accelerator = Accelerator(gradient_accumulation_steps=ACCUMULATION)
rank = accelerator.process_index
set_seed(0)
model = torch.nn.Linear(DIM, VOCAB)  # a per-token classifier stands in for a language-model head

# Real tokens per sequence, [rank][micro-batch] -> 2 sequences each: 11, 3 | 4, 12 tokens.
LENGTHS = [[[6, 5], [1, 2]], [[3, 1], [6, 6]]]


def micro_batch(lengths):
    features = torch.randn(len(lengths), MAX_LEN, DIM)
    labels = torch.randint(0, VOCAB, (len(lengths), MAX_LEN))
    for row, length in enumerate(lengths):
        labels[row, length:] = IGNORE  # padding positions carry no loss
    return features, labels


data = [[micro_batch(lengths) for lengths in per_rank] for per_rank in LENGTHS]  # same on every rank (seed)


def token_losses(net, features, labels):
    logits = net(features)
    return F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=IGNORE, reduction="none")


# Reference: one process, all 4 micro-batches, the mean over all real tokens.
reference = copy.deepcopy(model)
all_losses = torch.cat([token_losses(reference, f, l) for per_rank in data for f, l in per_rank])
all_labels = torch.cat([l.reshape(-1) for per_rank in data for _, l in per_rank])
(all_losses.sum() / (all_labels != IGNORE).sum()).backward()
reference_grad = torch.cat([p.grad.flatten() for p in reference.parameters()])


def distributed_grad(normalisation):
    """The gradient after one accumulation window of 2 micro-batches on each of the 2 ranks."""
    net = accelerator.prepare(copy.deepcopy(model))
    mine = data[rank]
    local_tokens = sum(int((labels != IGNORE).sum()) for _, labels in mine)  # this rank, whole window
    global_tokens = accelerator.reduce(torch.tensor(local_tokens, device=accelerator.device), "sum").item()
    for features, labels in mine:
        with accelerator.accumulate(net):
            losses = token_losses(net, features, labels)
            if normalisation == "global":
                loss = losses.sum() / global_tokens * accelerator.num_processes * ACCUMULATION
            elif normalisation == "local":
                loss = losses.sum() / local_tokens * ACCUMULATION
            else:  # "mean of means": the default mean of this micro-batch
                loss = losses.sum() / (labels != IGNORE).sum()
            accelerator.backward(loss)  # divides by ACCUMULATION; DDP averages over ranks when it syncs
    grad = torch.cat([p.grad.flatten() for p in accelerator.unwrap_model(net).parameters()])
    return (grad - reference_grad).abs().max().item(), local_tokens, global_tokens


global_diff, local_tokens, global_tokens = distributed_grad("global")
mean_of_means_diff, _, _ = distributed_grad("mean of means")
local_diff, _, _ = distributed_grad("local")
_claims.at_most(
    "global_token_mean_matches_one_process",
    measured=global_diff,
    control=mean_of_means_diff,
    tolerance=1e-6,
    tokens_per_micro_batch=[[int((l != IGNORE).sum()) for _, l in per_rank] for per_rank in data],
    global_tokens=global_tokens,
)
_claims.at_most(
    "token_count_must_be_reduced_across_ranks",
    measured=global_diff,
    control=local_diff,  # each rank divides by its own token count
    tolerance=1e-6,
    local_tokens=local_tokens,
    global_tokens=global_tokens,
)
