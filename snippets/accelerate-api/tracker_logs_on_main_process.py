# Experiment tracking with Accelerate: Accelerator(log_with=[tracker]) + init_trackers + log. Both
# Accelerator methods run on the main process only, so a 2-process job starts ONE run and logs each
# value once, at the step you pass. The tracker here is a custom GeneralTracker writing JSON lines
# (offline; W&B, TensorBoard & co. plug in the same way by name). Control: the same tracker started
# and logged directly in every process (what calling wandb.init() yourself does): one run per process.
# The value logged is the main process's own: each process passes its own loss (rank 1's is rank 0's
# + 1), and the run records rank 0's losses unchanged. Control: the same loop through a second
# Accelerator with the loss averaged over the processes first (accelerator.reduce(loss, "mean")).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/accelerate-api/tracker_logs_on_main_process.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import json
import shutil
import tempfile
from pathlib import Path

import torch
from accelerate import Accelerator
from accelerate.tracking import GeneralTracker

import _claims

STEPS = 4


class JsonlTracker(GeneralTracker):
    """A minimal offline tracker: one JSON-lines file per run."""

    name = "jsonl"
    requires_logging_directory = True

    def __init__(self, run_name, logging_dir=None):
        super().__init__()
        self.run_name, self.logging_dir, self.path = run_name, logging_dir, None

    def start(self):  # a new run: create its file, named by the process that started it
        self.path = Path(self.logging_dir) / f"{self.run_name}-rank{torch.distributed.get_rank()}.jsonl"
        self.path.write_text("")

    @property
    def tracker(self):
        return self.path

    def store_init_configuration(self, values):
        self.log({"config": values})

    def log(self, values, step=None, **kwargs):
        with self.path.open("a") as out:
            out.write(json.dumps({"step": step, **values}) + "\n")


def logged_losses(folder, run_name):
    """The "loss" values recorded in every run file of `run_name`, file by file, in logging order."""
    files = sorted(folder.glob(f"{run_name}-*.jsonl"))
    records = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    return [record["loss"] for record in records if "loss" in record]


def runs_and_steps(folder, run_name):
    """Every run file any process created in `folder`, and the steps logged in them (read on every rank)."""
    files = sorted(folder.glob(f"{run_name}-*.jsonl"))
    steps = [json.loads(line)["step"] for f in files for line in f.read_text().splitlines()]
    return len(files), sorted(s for s in steps if s is not None)


tracker = JsonlTracker("through-accelerator")
accelerator = Accelerator(log_with=[tracker])

# One scratch folder, made by rank 0 and shared with the others.
folder = [tempfile.mkdtemp(prefix="trackers-") if accelerator.is_main_process else None]
torch.distributed.broadcast_object_list(folder, src=0)
folder = Path(folder[0])
tracker.logging_dir = folder

accelerator.init_trackers("through-accelerator", config={"lr": 0.1})
for step in range(STEPS):
    loss = torch.tensor(0.5**step + accelerator.process_index)  # this process's own loss
    accelerator.log({"loss": loss.item()}, step=step)
accelerator.wait_for_everyone()

# Control for the value: the same loop, the loss averaged over the processes before it is logged.
reduced_tracker = JsonlTracker("reduced", folder)
reducing = Accelerator(log_with=[reduced_tracker])  # a second Accelerator shares the state
reducing.init_trackers("reduced", config={"lr": 0.1})
for step in range(STEPS):
    loss = torch.tensor(0.5**step + accelerator.process_index)
    reducing.log({"loss": reducing.reduce(loss, "mean").item()}, step=step)
accelerator.wait_for_everyone()

# Control: the same tracker class, started and logged in every process without the Accelerator.
direct = JsonlTracker("direct", folder)
direct.start()
direct.store_init_configuration({"lr": 0.1})
for step in range(STEPS):
    direct.log({"loss": 0.5**step + accelerator.process_index}, step=step)
accelerator.wait_for_everyone()

runs, steps = runs_and_steps(folder, "through-accelerator")
direct_runs, direct_steps = runs_and_steps(folder, "direct")
_claims.equal(
    "one_run_for_the_whole_job",
    measured=runs,
    control=direct_runs,
    expected=1,
    processes=accelerator.num_processes,
    trackers_on_this_process=len(accelerator.trackers),
)
_claims.equal(
    "each_step_logged_once",
    measured=steps,
    control=direct_steps,
    expected=list(range(STEPS)),
)
_claims.equal(
    "log_records_the_main_process_value",
    measured=logged_losses(folder, "through-accelerator"),
    control=logged_losses(folder, "reduced"),  # averaged over the processes before logging
    expected=[0.5**step for step in range(STEPS)],  # rank 0's own losses, steps 0..3
    rank1_passed=[0.5**step + 1 for step in range(STEPS)],
)

accelerator.wait_for_everyone()
if accelerator.is_main_process:
    shutil.rmtree(folder, ignore_errors=True)
