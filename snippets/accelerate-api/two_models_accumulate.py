# Two models, two optimizers, one Accelerator (the shape of a GAN or an encoder + head): prepare
# them together and pass BOTH models to accumulate(). Each model is its own DDP wrapper with its own
# gradient all-reduce; accumulate(a, b) puts each in no_sync on the non-boundary micro-batches. The
# prepared optimizers step only when sync_gradients is true, whichever models accumulate() was given.
# Controls: accumulate(encoder) only (the head all-reduces every micro-batch); the head's optimizer
# not prepared (it steps on every micro-batch); the head kept under no_sync (never all-reduced).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/accelerate-api/two_models_accumulate.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import contextlib

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

import _claims

MICRO = 4  # micro-batches per optimizer step
WINDOWS = 2  # optimizer steps
LR = 0.1

accelerator = Accelerator(gradient_accumulation_steps=MICRO)
rank, world = accelerator.process_index, accelerator.num_processes


def new_models():
    set_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh())
    head = torch.nn.Linear(16, 1)
    return encoder, head


def data(micro, r):
    g = torch.Generator().manual_seed(100 * micro + r)
    x = torch.randn(8, 8, generator=g)
    return x, x.sum(dim=1, keepdim=True).sin()


def counted(model):
    """A comm hook forwarding to torch's default all-reduce and counting its calls (DDP models only)."""
    counter = [0]

    def hook(state, bucket):
        counter[0] += 1
        return allreduce_hook(None, bucket)

    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        model.register_comm_hook(None, hook)
    return counter


def flat(*models):
    return torch.cat([p.detach().flatten() for m in models for p in m.parameters()])


def train(accumulate_head=True, prepare_head_optimizer=True, head_never_synced=False, one_optimizer=False):
    encoder, head = new_models()
    opt_enc = torch.optim.SGD(encoder.parameters(), lr=LR)
    opt_head = torch.optim.SGD(head.parameters(), lr=LR)
    if one_optimizer:  # one optimizer over both models' parameters
        shared = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=LR)
        encoder, head, shared = accelerator.prepare(encoder, head, shared)
        optimizers = [shared]
    elif prepare_head_optimizer:
        encoder, head, opt_enc, opt_head = accelerator.prepare(encoder, head, opt_enc, opt_head)
        optimizers = [opt_enc, opt_head]
    else:  # control: the head's optimizer stays a plain torch optimizer
        encoder, head, opt_enc = accelerator.prepare(encoder, head, opt_enc)
        optimizers = [opt_enc, opt_head]
    enc_count, head_count = counted(encoder), counted(head)
    head_updates = 0
    for micro in range(MICRO * WINDOWS):
        models = (encoder, head) if accumulate_head else (encoder,)
        with accelerator.accumulate(*models):
            with accelerator.no_sync(head) if head_never_synced else contextlib.nullcontext():
                x, y = data(micro, rank)
                before = flat(head)
                accelerator.backward(torch.nn.functional.mse_loss(head(encoder(x)), y))
                for optimizer in optimizers:
                    optimizer.step()
                    optimizer.zero_grad()
                head_updates += int(not torch.equal(before, flat(head)))
    return [enc_count[0], head_count[0]], head_updates, flat(encoder, head)


# Reference: one process, the composed model, each window's 4 micro-batches of both ranks as one batch.
encoder, head = new_models()
optimizer = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=LR)
for window in range(WINDOWS):
    batches = [data(m, r) for m in range(window * MICRO, (window + 1) * MICRO) for r in range(world)]
    x, y = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])
    torch.nn.functional.mse_loss(head(encoder(x)), y).backward()
    optimizer.step()
    optimizer.zero_grad()
reference = flat(encoder, head)

both_counts, both_updates, both_weights = train()
encoder_only_counts, encoder_only_updates, encoder_only_weights = train(accumulate_head=False)
_, plain_head_updates, _ = train(accumulate_head=False, prepare_head_optimizer=False)
_, _, never_synced_weights = train(head_never_synced=True)
_, _, encoder_only_never_synced = train(accumulate_head=False, head_never_synced=True)
_, _, one_optimizer_weights = train(one_optimizer=True)
_, _, one_optimizer_never_synced = train(one_optimizer=True, head_never_synced=True)

_claims.equal(
    "accumulate_both_models_one_all_reduce_each",
    measured=both_counts,
    control=encoder_only_counts,
    expected=[WINDOWS, WINDOWS],
    micro_batches=MICRO * WINDOWS,
    meaning="[encoder all-reduces, head all-reduces]",
)
_claims.equal(
    "prepared_optimizer_steps_once_per_window",
    measured=encoder_only_updates,
    control=plain_head_updates,
    expected=WINDOWS,
    micro_batches=MICRO * WINDOWS,
)
_claims.at_most(
    "two_models_match_one_process",
    measured=(both_weights - reference).abs().max().item(),
    control=(never_synced_weights - reference).abs().max().item(),
    tolerance=1e-6,
)
_claims.at_most(
    "head_outside_accumulate_still_matches",
    measured=(encoder_only_weights - reference).abs().max().item(),
    control=(encoder_only_never_synced - reference).abs().max().item(),
    tolerance=1e-6,
    note="accumulate(encoder) only: the head all-reduces every micro-batch, same weights",
)
_claims.at_most(
    "one_optimizer_for_both_models_matches",
    measured=(one_optimizer_weights - reference).abs().max().item(),
    control=(one_optimizer_never_synced - reference).abs().max().item(),
    tolerance=1e-6,
)
