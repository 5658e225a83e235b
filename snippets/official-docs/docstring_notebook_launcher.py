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
# (snippets/notebooks/notebook_launcher_cpu_trap.py), rank 0 plays a notebook kernel: a forked child with
# Accelerate's state and torch.distributed's world reset and the launcher's variables removed, with
# ACCELERATE_USE_CPU=true (this machine has no GPU), which calls notebook_launcher; it forks the 2 workers.
# Control: the same launch with ACCELERATE_MIXED_PRECISION set to the same value in the kernel's environment.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/official-docs/docstring_notebook_launcher.py
import ast
import gc
import inspect
import json
import multiprocessing
import os
import pathlib
import queue
import socket
import tempfile

import psutil
from accelerate import Accelerator, notebook_launcher
from accelerate.state import AcceleratorState
from torch.distributed import distributed_c10d

import _claims

HARD_DEADLINE_S = 60
LAUNCHER_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                      "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE",
                      "MIXED_PRECISION")  # fmt: skip

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


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def kernel(keywords, exported, results_dir, answers):
    """A notebook kernel's process, then the cell notebook_launcher(train, ...) with the docstring's keywords."""
    gc.disable()  # never collect the parent's garbage here: freeing a torch process group in a forked child can abort it
    inherited = distributed_c10d._world  # the harness's group, copied by fork: keep it alive, never use it
    distributed_c10d._world = distributed_c10d._World()
    AcceleratorState._reset_state(reset_partial_state=True)
    for name in list(os.environ):
        if name in LAUNCHER_VARIABLES or name.startswith(("TORCHELASTIC_", "ACCELERATE_", "PROOF_")):
            del os.environ[name]
    os.environ["ACCELERATE_USE_CPU"] = "true"  # no GPU here: without it each worker would run alone
    os.environ.update(exported)  # the control exports the variable Accelerate reads
    error = None
    try:
        notebook_launcher(train, args=(results_dir,), use_port=free_port(), **keywords)
    except BaseException as raised:  # noqa: BLE001
        error = f"{type(raised).__name__}: {raised}"
    finally:
        answers.put(error)
        answers.close()
        answers.join_thread()
        del inherited
        os._exit(0)


def launch(keywords, exported):
    gc.collect()
    context = multiprocessing.get_context("fork")
    answers = context.Queue()
    with tempfile.TemporaryDirectory() as results_dir:
        child = context.Process(target=kernel, args=(keywords, exported, results_dir, answers))
        try:
            child.start()
            error = answers.get(timeout=HARD_DEADLINE_S)
        except queue.Empty:
            error = f"no answer within {HARD_DEADLINE_S} s"
        finally:
            child.join(timeout=10)
            if child.is_alive():  # kill the kernel and the workers notebook_launcher forked under it
                tree = psutil.Process(child.pid).children(recursive=True) + [psutil.Process(child.pid)]
                for process in tree:
                    process.kill()
                psutil.wait_procs(tree, timeout=5)
                child.join(timeout=5)
        workers = [json.loads(p.read_text()) for p in sorted(pathlib.Path(results_dir).glob("*.json"))]
    return error, workers


if accelerator.is_main_process:
    keywords = documented_keywords()  # {'num_processes': 2, 'mixed_precision': 'fp16'}
    documented_error, documented = launch(keywords, {})
    control_error, control = launch(keywords, {"ACCELERATE_MIXED_PRECISION": keywords["mixed_precision"]})
    # Per worker, all judged: [Accelerator().mixed_precision, MIXED_PRECISION, ACCELERATE_MIXED_PRECISION].
    seen = lambda workers: sorted(  # noqa: E731
        ([w["mixed_precision"], w["MIXED_PRECISION"], w["ACCELERATE_MIXED_PRECISION"]] for w in workers), key=json.dumps
    )
    _claims.equal(
        "notebook_launcher_mixed_precision_ignored",
        measured=seen(documented),
        control=seen(control),  # control: the same launch with ACCELERATE_MIXED_PRECISION exported
        expected=[["no", keywords["mixed_precision"], None]] * keywords["num_processes"],
        documented_keywords=keywords,
        worlds=sorted([w["type"], w["num_processes"]] for w in documented),
        errors=[documented_error, control_error],
    )
accelerator.wait_for_everyone()
