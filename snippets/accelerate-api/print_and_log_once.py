# Why every print appears once per process under `accelerate launch`, and the Accelerate calls that
# print, log, track and prepare data only once.
#   1. accelerator.print prints on the local main process only: 1 line on one node of 2 processes.
#      Negative control: the built-in print, which every process runs (2 lines).
#   1b. With each process the first on its own node (local_process_index 0 on both, as on 2 machines with
#      1 process each), accelerator.print prints on both: once per node, not once per job (2 lines).
#      Negative control: the same print gated on accelerator.is_main_process (1 line).
#   2. A logger from accelerate.logging.get_logger logs on the main process only by default.
#      Negative control: the same call with main_process_only=False (every process logs).
#      Each record is prefixed "[RANK <process_index>] " (accelerate >= 1.13.0).
#      Negative control: the same message through the plain logging.getLogger of the same name.
#      With main_process_only=False and in_order=True each process logs in its turn: rank r after r of the
#      logger's barriers (accelerate >= 1.13.0; up to 1.12 main_process_only=False made every rank log at once).
#      Negative control: the same call without in_order (every rank logs before any barrier).
#   3. accelerator.init_trackers and accelerator.log reach the trackers (log_with) on the main process only.
#      Negative control: the same calls on a second Accelerator with Accelerate's main-process gate
#      (PartialState.on_main_process) removed for them.
#   3b. The loss logged through accelerator.log (main process only) is the main process's own, computed
#      on the batch that the prepared DataLoader gave it: 8 samples 0..7 in batches of 4 on 2 processes,
#      rank 0 logs 1.5 (samples 0-3) while the step's global batch (both batches, gathered) averages 3.5.
#      Negative control: the same step over the DataLoader not prepared (not sharded): every process
#      gets samples 0-3, and the logged loss is the mean of everything the step saw (1.5 and 1.5).
#   4. with accelerator.main_process_first(): the main process runs the block alone, the others enter
#      after it has left, so a cache it builds is built once, by the main process. "Building" takes 0.4 s,
#      or less once every other process is building it too (so that the control does not depend on who
#      arrives first).
#      Negative control: the same block without main_process_first (every process finds no cache and
#      builds it).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/accelerate-api/print_and_log_once.py
import contextlib
import io
import logging
import os
import tempfile
import time
from unittest import mock

import torch

from accelerate import Accelerator
from accelerate.logging import get_logger
from accelerate.state import PartialState
from accelerate.utils import gather_object
from accelerate.tracking import GeneralTracker
from accelerate.utils import broadcast_object_list, gather_object
from torch.utils.data import DataLoader

import _claims


class CountingTracker(GeneralTracker):
    """A custom experiment tracker (what log_with="wandb" or "tensorboard" would be) that records its calls."""

    name = "counting"
    requires_logging_directory = False

    def __init__(self):
        super().__init__()
        self.calls = []

    @property
    def tracker(self):
        return self.calls

    def log(self, values, step=None, **kwargs):
        self.calls.append((step, values))


tracker = CountingTracker()
accelerator = Accelerator(log_with=[tracker])  # <- experiment trackers go through the Accelerator
accelerator.init_trackers("print-and-log-once")  # on the main process only, like accelerator.log


def total(count):
    """The sum of one number per process, on every process."""
    return sum(gather_object([count]))


# 1. print against accelerator.print: count the lines each process writes to its stdout.
printed, accelerated = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(printed):
    print(f"epoch 0 loss 0.5 (process {accelerator.process_index})")
with contextlib.redirect_stdout(accelerated):
    accelerator.print(f"epoch 0 loss 0.5 (process {accelerator.process_index})")
_claims.equal(
    "accelerator_print_prints_once",
    measured=total(len(accelerated.getvalue().splitlines())),
    control=total(len(printed.getvalue().splitlines())),
    expected=1,
    processes=accelerator.num_processes,
)

# 1b. Once per node, not once per job: what accelerator.print does when every process is the first on its node
# (2 machines with 1 process each: local_process_index 0 on both), against a print gated on is_main_process.
state = PartialState()
own_local_index = state.local_process_index
state.local_process_index = 0  # the state of the rank's own machine; restored below
try:
    per_node, per_job = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(per_node):
        accelerator.print("epoch 0 loss 0.5")
    with contextlib.redirect_stdout(per_job):
        if accelerator.is_main_process:
            print("epoch 0 loss 0.5")
finally:
    state.local_process_index = own_local_index
_claims.equal(
    "accelerator_print_is_once_per_node",
    measured=total(len(per_node.getvalue().splitlines())),
    control=total(len(per_job.getvalue().splitlines())),
    expected=2,
    local_process_index_restored=state.local_process_index,
)

# 2. accelerate.logging.get_logger: count the records that reach a handler on each process.
records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
logger = get_logger("print_and_log_once")  # a LoggerAdapter over logging.getLogger("print_and_log_once")
base, saved = logger.logger, (logger.logger.level, logger.logger.propagate)
base.setLevel(logging.INFO)
base.propagate = False  # keep the records out of the worker's own output
base.addHandler(handler)
try:
    logger.info("saved checkpoint-100")  # main_process_only=True is the default
    main_only = total(len(records))
    main_only_messages = list(records)
    records.clear()
    logger.info("saved checkpoint-100", main_process_only=False)
    everywhere = total(len(records))
    as_logged = records[-1]  # this process's record, through the adapter
    records.clear()
    base.info("saved checkpoint-100")  # the same logger without the adapter
    plain = records[-1]
    records.clear()
    # in_order=True: how many barriers this process had passed when its own record was emitted (its turn)
    barriers, turns = [], []
    wait_for_everyone = PartialState.wait_for_everyone
    handler.emit = lambda record: turns.append(len(barriers))
    with mock.patch.object(PartialState, "wait_for_everyone", lambda self: (barriers.append(1), wait_for_everyone(self))):
        logger.info("my shard is done", main_process_only=False, in_order=True)
        ordered_turns, ordered_barriers = turns[:], len(barriers)
        barriers.clear(), turns.clear()
        logger.info("my shard is done", main_process_only=False)  # control: no in_order
        unordered_turns = turns[:]
finally:
    base.removeHandler(handler)
    base.setLevel(saved[0])
    base.propagate = saved[1]
_claims.equal(
    "get_logger_logs_on_main_only",
    measured=main_only,
    control=everywhere,
    expected=1,
    message_as_logged=main_only_messages,  # the adapter prefixes "[RANK <process_index>] "
)
_claims.equal(
    "get_logger_prefixes_the_rank",
    measured=as_logged,
    control=plain,  # logging.getLogger's own record of the same call
    expected=f"[RANK {accelerator.process_index}] saved checkpoint-100",
)

_claims.equal(
    "in_order_logs_each_process_in_turn",
    measured=gather_object(ordered_turns),  # rank r logs after r barriers: one at a time, rank 0 first
    control=gather_object(unordered_turns),  # without in_order every process logs at once, before any barrier
    expected=list(range(accelerator.num_processes)),
    barriers_entered=ordered_barriers,
)

# 3. accelerator.log against the same calls with the main-process gate removed.
accelerator.log({"loss": 0.5}, step=0)
through_accelerator = total(len(tracker.calls))
ungated_tracker = CountingTracker()
ungated = Accelerator(log_with=[ungated_tracker])  # a second Accelerator shares the state
with mock.patch.object(PartialState, "on_main_process", lambda self, function=None: function):  # no gate
    ungated.init_trackers("print-and-log-once-ungated")
    ungated.log({"loss": 0.5}, step=0)
everywhere_tracked = total(len(ungated_tracker.calls))
_claims.equal(
    "accelerator_log_tracks_on_main_only",
    measured=through_accelerator,
    control=everywhere_tracked,
    expected=1,
    trackers_per_process=gather_object([len(accelerator.trackers)]),
)


# 3b. What rank 0 logs: its own loss, on its own shard of the step's batch.
def logged_and_global_loss(loader, step):
    """[the loss the tracker received at `step`, the mean over the step's batches of all processes]."""
    batch = list(loader)[0]  # this process's first batch (8 samples in batches of 4: its only one once prepared)
    loss = batch.float().mean()  # a per-sample loss equal to the sample's value, averaged over the batch
    accelerator.log({"loss": loss.item()}, step=step)  # reaches the tracker on the main process only
    everything = accelerator.gather(batch).float()  # the batches every process took at this step
    logged = gather_object([values["loss"] for at, values in tracker.calls if at == step])  # rank 0's record
    return [*logged, everything.mean().item()]


samples = torch.arange(8)
_claims.equal(
    "rank0_logs_its_own_shard_loss",
    measured=logged_and_global_loss(accelerator.prepare(DataLoader(samples, batch_size=4)), step=1),
    control=logged_and_global_loss(DataLoader(samples, batch_size=4), step=2),  # not prepared: not sharded
    expected=[1.5, 3.5],  # rank 0 logged the mean of samples 0-3; the step's 8 samples average 3.5
    processes=accelerator.num_processes,
)


# 4. main_process_first: "load the dataset, tokenise it into a cache" on every process.
def build_cache(folder, first):
    """Every process runs the same block; returns the process indices that built the cache themselves."""
    cache = os.path.join(folder, "tokenized.cache")
    building = os.path.join(folder, "building-{}")  # one flag per process that is building the cache
    with accelerator.main_process_first() if first else contextlib.nullcontext():
        built = not os.path.exists(cache)
        if built:
            # Tokenising takes a while: 0.4 s at most, or until every other process is building it too.
            open(building.format(accelerator.process_index), "w").close()
            others = [building.format(r) for r in range(accelerator.num_processes) if r != accelerator.process_index]
            deadline = time.monotonic() + 0.4
            while time.monotonic() < deadline and not all(map(os.path.exists, others)):
                time.sleep(0.005)
            with open(cache, "w") as out:
                out.write(f"written by process {accelerator.process_index}\n")
    return sorted(gather_object([accelerator.process_index] if built else []))


with tempfile.TemporaryDirectory() as own_dir:
    shared = broadcast_object_list([own_dir])[0]  # rank 0's folder on every process
    os.makedirs(os.path.join(shared, "first"), exist_ok=True)
    os.makedirs(os.path.join(shared, "plain"), exist_ok=True)
    accelerator.wait_for_everyone()
    _claims.equal(
        "main_process_first_builds_the_cache_once",
        measured=build_cache(os.path.join(shared, "first"), first=True),
        control=build_cache(os.path.join(shared, "plain"), first=False),
        expected=[0],  # built once, by the main process
    )
    accelerator.wait_for_everyone()  # rank 0 deletes the folder when it leaves this block
