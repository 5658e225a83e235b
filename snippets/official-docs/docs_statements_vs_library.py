# Statements and examples of Accelerate's guides that the library (1.15.0) contradicts, run on 2 ranks.
# Every documented text is taken from _doc_excerpts.py (copied byte for byte from the docs' sources) or, for a
# docstring, from the installed library itself; each is run as written, then corrected, and both outcomes reported.
#
# 1. basic_tutorials/launch.md: `MIXED_PRECISION="fp16" torchrun ...`: the environment that command gives each rank
#    leaves Accelerator().mixed_precision at "no"; the library reads ACCELERATE_MIXED_PRECISION (accelerate/state.py).
# 2. Accelerator.set_trigger's docstring calls accelerator.check_breakpoint(), which does not exist (check_trigger).
# 3. usage_guides/checkpoint.md: Accelerator(project_dir=...) then save_state() raises TypeError (automatic
#    checkpoint naming is off by default); with it on, the folder is checkpoints/checkpoint_0 and the documented
#    load_state(".../checkpointing/checkpoint_0") raises.
# 4. basic_tutorials/migration.md: save_model() writes model.safetensors by default, so the documented
#    torch.load(".../pytorch_model.bin") raises FileNotFoundError.
# 5. usage_guides/gradient_accumulation.md says Accelerate adjusts the schedule for accumulation "automagically":
#    a schedule sized in batches, stepped inside accumulate(), ends half-way with 2 accumulation steps.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/official-docs/docs_statements_vs_library.py
import inspect
import os
import re
import shlex
import shutil
import tempfile
import textwrap
import traceback

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState, GradientState
from accelerate.utils import broadcast_object_list

import _claims
from _doc_excerpts import EXCERPTS


def code(key):
    """The excerpt's text without its Markdown fences."""
    lines = EXCERPTS[key]["text"].split("\n")
    return "\n".join(line for line in lines if not line.lstrip().startswith("```"))


def run(source, namespace, name="<doc>", first_line=1):
    """Run source; return (exception class name or 'none', line of the documentation it failed at)."""
    try:
        exec(compile(source, name, "exec"), namespace)
    except Exception as error:  # the documented code failing is the measurement
        frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == name]
        return type(error).__name__, (first_line + frames[-1].lineno - 1 if frames else None)
    return "none", None


def doc_line(key):
    return EXCERPTS[key]["main"][0] + (1 if EXCERPTS[key]["text"].startswith("```") else 0)


def fresh_state():
    AcceleratorState._reset_state(reset_partial_state=False)  # keep the process group, rebuild the rest
    GradientState._reset_state()


state = Accelerator()
rank = state.process_index
workdir = [tempfile.mkdtemp() if rank == 0 else None]
broadcast_object_list(workdir)  # one folder for both ranks, as a checkpoint folder on a shared disk
workdir = workdir[0]

# --- 1. the environment of the documented torchrun command -------------------------------------------------------
launch_line = code("launch_torchrun").strip()
documented_env = {}
for token in shlex.split(launch_line):
    if "=" not in token or token.startswith("-"):
        break  # the command starts here
    key, value = token.split("=", 1)
    documented_env[key] = value


def mixed_precision_with(env):
    saved = dict(os.environ)
    os.environ.pop("ACCELERATE_MIXED_PRECISION", None)  # torchrun sets no ACCELERATE_* variable
    os.environ.update(env)
    fresh_state()
    try:
        return Accelerator().mixed_precision
    finally:
        os.environ.clear()
        os.environ.update(saved)
        fresh_state()


documented_mp = mixed_precision_with(documented_env)
accelerate_env = {"ACCELERATE_" + key: value for key, value in documented_env.items()}
_claims.equal(
    "torchrun_mixed_precision_variable_ignored",
    measured=documented_mp,
    control=mixed_precision_with(accelerate_env),  # control: the variable the library reads
    expected="no",
    documented_environment=documented_env,
    corrected_environment=accelerate_env,
)

# --- 2. set_trigger's docstring example ------------------------------------------------------------------------
docstring = inspect.getdoc(Accelerator.set_trigger)
example = docstring.split("```python")[1].split("```")[0]
example = "\n".join(
    line.strip()[4:] if line.strip()[:4] in (">>> ", "... ") else line.strip() for line in example.split("\n")
)


def trigger_example(source):
    """The docstring's lines inside a training loop; rank 1's loss is the one that should stop training."""
    namespace = {"should_do_breakpoint": lambda loss: loss > 1.0, "loss": 0.5 + rank}
    loop = "stopped_at = None\nfor step in range(3):\n" + textwrap.indent(source.strip(), "    ")
    loop = loop.replace("    break", "    stopped_at = step\n        break")
    error, _ = run(loop, namespace)
    return error, namespace.get("stopped_at")


documented_trigger = trigger_example(example)
corrected_trigger = trigger_example(example.replace("check_breakpoint", "check_trigger"))
fresh_state()
_claims.equal(
    "set_trigger_docstring_calls_missing_method",
    measured=documented_trigger[0],
    control=corrected_trigger[0],  # control: the same example calling check_trigger()
    expected="AttributeError",
    has_check_breakpoint=hasattr(Accelerator, "check_breakpoint"),
    corrected_stopped_at_step=corrected_trigger[1],  # both ranks stop at step 0 although only rank 1 set it
)

# --- 3. checkpoint.md's example ------------------------------------------------------------------------------------
PRELUDE = """
import torch
torch.manual_seed(0)
my_model = torch.nn.Linear(4, 1)
my_optimizer = torch.optim.SGD(my_model.parameters(), lr=0.1)
my_training_dataloader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=2)
my_loss_function = torch.nn.functional.mse_loss
num_epochs = 1
"""
checkpoint_doc = code("checkpoint_example")
naming_on = checkpoint_doc.replace(
    'Accelerator(project_dir="my/save/path")',
    'Accelerator(project_config=ProjectConfiguration(project_dir="my/save/path", automatic_checkpoint_naming=True))',
)
checkpoint_fixed = naming_on.replace("my/save/path/checkpointing/", "my/save/path/checkpoints/")


def checkpoint_run(source, folder):
    path = os.path.join(workdir, folder)
    os.makedirs(path, exist_ok=True)
    here = os.getcwd()
    os.chdir(path)  # the example's project_dir is relative
    namespace = {}
    exec(PRELUDE + "from accelerate.utils import ProjectConfiguration\n", namespace)
    try:
        outcome = run(source, namespace, "<checkpoint.md>", doc_line("checkpoint_example"))
        saved = sorted(
            os.path.relpath(root, "my/save/path") for root, dirs, files in os.walk("my/save/path") if files
        )
    finally:
        os.chdir(here)
        fresh_state()
    return outcome, saved


documented_ckpt = checkpoint_run(checkpoint_doc, "documented")
naming_on_ckpt = checkpoint_run(naming_on, "naming_on")
fixed_ckpt = checkpoint_run(checkpoint_fixed, "fixed")
_claims.equal(
    "checkpoint_example_save_state_raises",
    measured=documented_ckpt[0][0],
    control=fixed_ckpt[0][0],  # control: automatic_checkpoint_naming=True and the checkpoints/ folder
    expected="TypeError",
    failing_doc_line=documented_ckpt[0][1],
    saved_folders_corrected=fixed_ckpt[1],
)
_claims.equal(
    "checkpoint_example_load_path_wrong",
    measured=naming_on_ckpt[0][0],
    control=fixed_ckpt[0][0],  # control: load_state on checkpoints/checkpoint_0
    expected="ValueError",
    failing_doc_line=naming_on_ckpt[0][1],
    saved_folders=naming_on_ckpt[1],
)

# --- 4. migration.md: save_model, then torch.load(pytorch_model.bin) -------------------------------------------
save_doc, load_doc = code("migration_save"), code("migration_load")


def migration_run(save_source, name):
    fresh_state()
    accelerator = Accelerator()
    torch.manual_seed(0)
    model = accelerator.prepare(torch.nn.Linear(4, 2))
    folder = os.path.join(workdir, name)
    namespace = {"accelerator": accelerator, "model": model, "save_directory": folder, "os": os, "torch": torch}
    # a barrier between the two steps: only the main process writes, and the guide loads in a later step
    outcome = run(save_source + "\naccelerator.wait_for_everyone()\n" + load_doc, namespace, "<migration.md>")
    files = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    fresh_state()
    return outcome[0], files


documented_save = migration_run(save_doc, "documented_model")
fixed_save = migration_run(
    save_doc.replace("save_directory)", "save_directory, safe_serialization=False)"), "fixed_model"
)
_claims.equal(
    "save_model_then_load_pytorch_model_bin_fails",
    measured=documented_save[0],
    control=fixed_save[0],  # control: save_model(..., safe_serialization=False) writes pytorch_model.bin
    expected="FileNotFoundError",
    files_written=documented_save[1],
    files_written_corrected=fixed_save[1],
)


# --- 5. a schedule sized in batches under accumulate() ---------------------------------------------------------
def final_lr(accumulation_steps):
    fresh_state()
    accelerator = Accelerator(gradient_accumulation_steps=accumulation_steps)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    dataloader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=2
    )
    # sized in batches, as examples/by_feature/gradient_accumulation.py does: len(train_dataloader) * num_epochs
    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, 1.0, 0.0, total_iters=len(dataloader))
    model, optimizer, dataloader, scheduler = accelerator.prepare(model, optimizer, dataloader, scheduler)
    for inputs, targets in dataloader:
        with accelerator.accumulate(model):
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
    result = scheduler.get_last_lr()[0], accelerator.gradient_state.adjust_scheduler
    fresh_state()
    return result


accumulated_lr, adjust_scheduler = final_lr(2)
plain_lr, _ = final_lr(1)
_claims.between(
    "schedule_in_batches_ends_halfway_with_accumulation",
    measured=accumulated_lr,
    control=plain_lr,  # control: the same loop and schedule without accumulation (gradient_accumulation_steps=1)
    low=0.0499,
    high=0.0501,
    initial_lr=0.1,
    gradient_state_adjust_scheduler=adjust_scheduler,
)

state.wait_for_everyone()
if rank == 0:
    shutil.rmtree(workdir, ignore_errors=True)
