# notebook_launcher's docstring (installed 1.15.0) shows
#     notebook_launcher(train, args=(arg1, arg2), num_processes=2, mixed_precision="fp16")
# and says of mixed_precision: 'If `fp16` or `bf16`, will use mixed precision training on multi-device.'
# With num_processes > 1 notebook_launcher hands it to patch_environment(..., mixed_precision=...), which
# upper-cases the keyword: the workers get MIXED_PRECISION, while AcceleratorState reads
# ACCELERATE_MIXED_PRECISION (accelerate/state.py). An Accelerator() created in the launched function, as the
# launcher requires, then reports mixed_precision 'no'.
#
# The docstring's call is read from the installed library (inspect.getdoc) and run with its own keywords; only
# the placeholder args become a results folder, and a free port is added. As on the notebooks page
# (snippets/notebooks/notebook_launcher_cpu_trap.py), rank 0 plays a notebook kernel (snippets/_notebook_kernel.py:
# a forked child that forgets the launch it came from), with ACCELERATE_USE_CPU=true (this machine has no GPU),
# which calls notebook_launcher; it forks the 2 workers.
# Control: the same launch with ACCELERATE_MIXED_PRECISION set to the same value in the kernel's environment.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/official-docs/docstring_notebook_launcher.py
import ast
import inspect
import json
import os
import pathlib

from accelerate import Accelerator, notebook_launcher

import _claims
from _notebook_kernel import free_port, run_cell

HARD_DEADLINE_S = 60

accelerator = Accelerator()


def documented_keywords():
    """The constant keywords of the notebook_launcher(...) call in the installed docstring's example."""
    example = inspect.getdoc(notebook_launcher).split("```python")[1].split("```")[0]
    calls = [node for node in ast.walk(ast.parse(example)) if isinstance(node, ast.Call)]
    call = next(node for node in calls if getattr(node.func, "id", None) == "notebook_launcher")
    return {k.arg: k.value.value for k in call.keywords if isinstance(k.value, ast.Constant)}


def train(results_dir):
    """The launched function: an Accelerator created inside it, as notebook_launcher requires."""
    acc = Accelerator()
    report = {"mixed_precision": acc.mixed_precision, "type": str(acc.distributed_type).split(".")[-1],
              "num_processes": acc.num_processes,
              "MIXED_PRECISION": os.environ.get("MIXED_PRECISION"),
              "ACCELERATE_MIXED_PRECISION": os.environ.get("ACCELERATE_MIXED_PRECISION")}  # fmt: skip
    pathlib.Path(results_dir, f"{os.getpid()}.json").write_text(json.dumps(report))


def launch(keywords, exported):
    """The cell notebook_launcher(train, ...) with the docstring's keywords, in a fresh kernel whose
    environment also has `exported`."""

    def cell(results_dir):
        os.environ["ACCELERATE_USE_CPU"] = "true"  # no GPU here: without it each worker would run alone
        os.environ.update(exported)  # the control exports the variable Accelerate reads
        notebook_launcher(train, args=(results_dir,), use_port=free_port(), **keywords)

    error, workers, _ = run_cell(cell, HARD_DEADLINE_S)  # None, or the error the cell raised
    return error, workers


if accelerator.is_main_process:
    keywords = documented_keywords()  # {'num_processes': 2, 'mixed_precision': 'fp16'}
    documented_error, documented = launch(keywords, {})
    control_error, control = launch(keywords, {"ACCELERATE_MIXED_PRECISION": keywords["mixed_precision"]})
    # Per worker, judged: [Accelerator().mixed_precision, MIXED_PRECISION]. ACCELERATE_MIXED_PRECISION is reported,
    # not judged: the control exports it itself, so judging it would make the control differ whatever the library did.
    seen = lambda workers: sorted(([w["mixed_precision"], w["MIXED_PRECISION"]] for w in workers), key=json.dumps)  # noqa: E731
    accelerate_variable = lambda workers: [w["ACCELERATE_MIXED_PRECISION"] for w in workers]  # noqa: E731
    _claims.equal(
        "notebook_launcher_mixed_precision_ignored",
        measured=seen(documented),
        control=seen(control),  # control: the same launch with ACCELERATE_MIXED_PRECISION exported
        expected=[["no", keywords["mixed_precision"]]] * keywords["num_processes"],
        accelerate_mixed_precision_in_workers=accelerate_variable(documented),  # None: the launcher set none
        accelerate_mixed_precision_in_workers_control=accelerate_variable(control),
        documented_keywords=keywords,
        worlds=sorted([w["type"], w["num_processes"]] for w in documented),
        errors=[documented_error, control_error],
    )
accelerator.wait_for_everyone()
