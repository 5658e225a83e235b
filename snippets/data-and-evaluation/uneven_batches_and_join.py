# Uneven data on 2 ranks: 10 samples in batches of 4 make 3 batches, which 2 ranks cannot share evenly.
#   * even_batches=True (the default) pads the last round with samples from the start: 2 steps per rank;
#     even_batches=False gives rank 0 two steps and rank 1 one.
#   * Evaluating on the padded loader: gather_for_metrics drops the samples padding duplicated (10 values
#     come back), plain gather keeps them (16).
#   * drop_last=True: 14 samples in batches of 4 give 3 full batches (the DataLoader drops [12, 13]), and
#     the prepared loader stops at the last round both ranks can fill: 1 step each, samples 8-13 unseen.
#     With drop_last=False every sample is seen (the last round padded from the start).
#   * accelerator.join_uneven_inputs() only acts on multi-GPU-type runs (Accelerator.multi_device): on a
#     multi-CPU run it warns and does nothing, not even its even_batches override. Forcing the multi-GPU
#     branch shows what it does there: the override, and torch's Join around the loop.
#   * torch's Join lets a rank that ran out of batches shadow the other's all-reduces, so both finish;
#     without it, the rank with the extra batch fails in its all-reduce (here at once, because the other
#     process has exited; run in 2 forked children with their own process group and a hard time limit).
#   * Join's options left out, the joined step divides rank 0's gradient by the initial world size (2):
#     its weight equals one process's run whose last step takes half that gradient.
# Negative controls: even_batches=False; plain gather; drop_last=False; the multi-GPU branch of
# join_uneven_inputs; no Join; Join(divide_by_initial_world_size=False) for the joined step's divisor.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/data-and-evaluation/uneven_batches_and_join.py
import contextlib
import warnings

import accelerate.utils
import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration
from torch.distributed.algorithms import Join
from torch.utils.data import DataLoader

import _claims
from _forked_pair import run_pair

accelerator = Accelerator()  # even_batches=True by default (DataLoaderConfiguration)
dataset = torch.arange(10, dtype=torch.float32).unsqueeze(1)  # 10 samples of 1 feature


def local_epoch(loader, body=lambda batch: None):
    """Iterate one epoch on this rank; return its step count and the samples it saw."""
    steps, seen = 0, []
    for batch in loader:
        body(batch)
        steps += 1
        seen += batch.flatten().int().tolist()
    return steps, seen


def steps_per_rank(acc, loader):
    """[steps of rank 0, steps of rank 1] and the samples this rank saw."""
    steps, seen = local_epoch(loader)
    return acc.gather(torch.tensor([steps], device=acc.device)).tolist(), seen


# --- 1. even_batches: padded to equal step counts, or not ---
even_steps, even_seen = steps_per_rank(accelerator, accelerator.prepare(DataLoader(dataset, batch_size=4)))
uneven_acc = Accelerator(dataloader_config=DataLoaderConfiguration(even_batches=False))
uneven_steps, uneven_seen = steps_per_rank(uneven_acc, uneven_acc.prepare(DataLoader(dataset, batch_size=4)))
_claims.equal(
    "even_batches_pads_to_equal_steps",
    measured=even_steps,
    control=uneven_steps,  # even_batches=False
    expected=[2, 2],
    samples_seen_padded=even_seen,
    samples_seen_unpadded=uneven_seen,
)


# --- 1b. evaluation on the padded loader: gather_for_metrics drops the duplicates, gather keeps them ---
# even_batches=True written out: 1b and 1c are about padding and drop_last, whatever the default is
padded_acc = Accelerator(dataloader_config=DataLoaderConfiguration(even_batches=True))


def evaluated_samples(gather):
    """Every sample id that came back from gathering each batch of a padded (even_batches=True) loader."""
    loader = padded_acc.prepare(DataLoader(dataset, batch_size=4))
    return sorted(v for batch in loader for v in gather(batch).flatten().int().tolist())


_claims.equal(
    "gather_for_metrics_drops_the_padding",
    measured=evaluated_samples(padded_acc.gather_for_metrics),
    control=evaluated_samples(padded_acc.gather),  # keeps the padding's duplicates: 16 values
    expected=list(range(10)),
)

# --- 1c. drop_last=True: the prepared loader stops at the last round every rank can fill ---
fourteen = torch.arange(14, dtype=torch.float32).unsqueeze(1)


def unseen_with(drop_last):
    """[steps of rank 0, steps of rank 1] and the sample ids no rank saw in one epoch."""
    loader = padded_acc.prepare(DataLoader(fourteen, batch_size=4, drop_last=drop_last))
    steps, seen = steps_per_rank(padded_acc, loader)
    everything = set(accelerate.utils.gather_object(seen))
    return steps, [i for i in range(len(fourteen)) if i not in everything]


dropped_steps, dropped = unseen_with(drop_last=True)
kept_steps, kept = unseen_with(drop_last=False)
_claims.equal(
    "drop_last_stops_at_the_last_full_round",
    measured=dropped,  # samples never seen: the full batch [8-11] that no round could pair, and [12, 13]
    control=kept,  # drop_last=False: the last round is padded, nothing left out
    expected=list(range(8, 14)),
    steps_with_drop_last=dropped_steps,
    steps_without=kept_steps,
)


# --- 2. join_uneven_inputs on a multi-CPU run: a warning, and no effect ---
# even_batches=True (the default) written out: this part is about the override, whatever the default is
accelerator = Accelerator(dataloader_config=DataLoaderConfiguration(even_batches=True))
model = torch.nn.Linear(1, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
model, optimizer, loader = accelerator.prepare(model, optimizer, DataLoader(dataset, batch_size=4))


def train_step(batch):
    accelerator.backward(model(batch).pow(2).mean())
    optimizer.step()
    optimizer.zero_grad()


def epoch_under_join_uneven_inputs():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with accelerator.join_uneven_inputs([model], even_batches=False):  # asks for uneven batches + Join
            steps, _ = local_epoch(loader, train_step)
    # Count the steps only after the context: a collective inside it would pair with the other
    # rank's gradient all-reduce.
    steps = accelerator.gather(torch.tensor([steps], device=accelerator.device)).tolist()
    return steps, [str(w.message) for w in caught if "join" in str(w.message).lower()]


cpu_steps, cpu_warnings = epoch_under_join_uneven_inputs()
multi_device = Accelerator.multi_device  # a property: True only for MULTI_GPU, MULTI_NPU, MULTI_XPU, ...
try:
    Accelerator.multi_device = property(lambda self: True)  # take the branch a multi-GPU run takes
    gpu_branch_steps, _ = epoch_under_join_uneven_inputs()  # even_batches overridden AND Join enabled
finally:
    Accelerator.multi_device = multi_device
_claims.equal(
    "join_uneven_inputs_is_a_noop_on_cpu",
    measured=cpu_steps,  # the override was ignored: still padded, 2 steps each
    control=gpu_branch_steps,  # the multi-GPU branch: unpadded 2 and 1, both ranks finished thanks to Join
    expected=[2, 2],
    distributed_type=str(accelerator.distributed_type),
    warning=cpu_warnings[:1],
)


# --- 3. torch's Join (what join_uneven_inputs enters on GPUs) lets uneven ranks finish ---
def uneven_training(use_join, **join_options):
    def per_rank(rank):
        torch.manual_seed(0)  # same initial weights on both ranks (DDP broadcasts rank 0's anyway)
        ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1))
        sgd = torch.optim.SGD(ddp.parameters(), lr=0.01)
        my_batches = [dataset[0:4], dataset[8:10]] if rank == 0 else [dataset[4:8]]  # 2 batches vs 1
        with Join([ddp], **join_options) if use_join else contextlib.nullcontext():
            for batch in my_batches:
                ddp(batch).pow(2).mean().backward()  # DDP all-reduces the gradients here
                sgd.step()
                sgd.zero_grad()
        return {"steps": len(my_batches), "weight": ddp.module.weight.item()}

    return run_pair(per_rank, time_limit=20.0)


if accelerator.is_main_process:  # one pair of forked children is enough; rank 1 only waits below
    joined, joined_codes = uneven_training(use_join=True)
    unjoined, unjoined_codes = uneven_training(use_join=False)
    _claims.equal(
        "join_lets_uneven_ranks_finish",
        measured=sum(status == "finished" for status, _ in joined.values()),
        control=sum(status == "finished" for status, _ in unjoined.values()),  # no Join
        expected=2,
        with_join={str(rank): value for rank, value in sorted(joined.items())},
        without_join={str(rank): value for rank, value in sorted(unjoined.items())},
        exit_codes=[joined_codes, unjoined_codes],
    )

    # What the joined step averages: rank 0's last batch, with rank 1 joined, against one process that
    # takes the first step on the mean gradient of both ranks' batches and the second on half of rank 0's
    # last gradient (divided by the initial world size, 2) or on all of it (divided by the 1 rank left).
    def one_process_weight(last_step_share):
        torch.manual_seed(0)
        layer = torch.nn.Linear(1, 1)
        sgd = torch.optim.SGD(layer.parameters(), lr=0.01)
        for batches, share in (([dataset[0:4], dataset[4:8]], 0.5), ([dataset[8:10]], last_step_share)):
            for batch in batches:
                (layer(batch).pow(2).mean() * share).backward()
            sgd.step()
            sgd.zero_grad()
        return layer.weight.item()

    per_current_ranks, _ = uneven_training(use_join=True, divide_by_initial_world_size=False)
    halved, whole = one_process_weight(0.5), one_process_weight(1.0)
    def rank0_weight(outcome):
        status, value = outcome.get(0, (None, None))
        return value["weight"] if status == "finished" else float("inf")  # a failed child matches nothing

    rank0_default, rank0_current = rank0_weight(joined), rank0_weight(per_current_ranks)
    _claims.at_most(
        "joined_step_divides_by_the_initial_world_size",
        measured=abs(rank0_default - halved),  # Join's options left out
        control=abs(rank0_current - halved),  # divide_by_initial_world_size=False
        tolerance=1e-6,
        rank0_weight_default=rank0_default,
        rank0_weight_divided_by_ranks_left=rank0_current,
        one_process_half_last_step=halved,
        one_process_whole_last_step=whole,
    )
accelerator.wait_for_everyone()
