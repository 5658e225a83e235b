# `accelerate launch` and torchrun start the same kind of workers: one training function with a plain
# Accelerator() ends with the same weights under both. This snippet's own 2 ranks were started by
# `accelerate launch --multi_gpu --num_processes 2` and run the function here; rank 0 also writes it
# into a script and runs that as two child launches at once: `torchrun --nproc_per_node 2` (what the
# deprecated `python -m torch.distributed.launch --use_env` became) and
# `accelerate launch --cpu --num_processes 2`, which starts ONE process.
# It also parses the handout's command, whose "–" (en dash) is not an option prefix.
# Negative controls: the same function with another seed ends elsewhere; our --multi_gpu launch has 2
# processes; torchrun's module is not deprecated; with ASCII "--" the command parses as meant.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/launching/launchers_give_same_result.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs; ~6 s: two child launches)
import inspect
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile

import torch
import torch.distributed.launch
import torch.distributed.run
from accelerate import Accelerator
from accelerate.utils import gather_object, set_seed

import _claims

accelerator = Accelerator()


def train_weights(accelerator, seed):
    """3 SGD steps of a Linear(4, 1) on 16 samples, batches of 4 split over the ranks."""
    set_seed(seed)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    model, optimizer, loader = accelerator.prepare(model, optimizer, torch.utils.data.DataLoader(data, batch_size=4))
    for x, y in loader:
        accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
        optimizer.step()
        optimizer.zero_grad()
    return torch.cat([p.detach().flatten() for p in accelerator.unwrap_model(model).parameters()]).tolist()


# The child script: the very same function, then one JSON file per process.
CHILD = f"""
import json, os, sys, torch
from accelerate import Accelerator
from accelerate.utils import set_seed

{inspect.getsource(train_weights)}
accelerator = Accelerator()  # ACCELERATE_USE_CPU=true in the environment: gloo on CPU
weights = {{seed: train_weights(accelerator, seed) for seed in (0, 1)}}
with open(os.path.join(sys.argv[1], f"{{os.getpid()}}.json"), "w") as out:
    json.dump({{"world": accelerator.num_processes, "type": str(accelerator.distributed_type), "weights": weights}}, out)
accelerator.end_training()  # destroys the process group
# torch 2.13 on CPU sometimes aborts in its C++ teardown at exit ("terminate called without an active
# exception", SIGABRT) after all the work is done; leave without that teardown, the results are written.
os._exit(0)
"""

# A child launch must not see this launch's rendezvous or the harness's report file.
SCRUB = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK",
         "ROLE_RANK", "ROLE_NAME", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "PROOF_REPORT_FILE")


def clean_env(use_cpu):
    env = {k: v for k, v in os.environ.items()
           if k not in SCRUB and not k.startswith(("TORCHELASTIC_", "TORCH_NCCL_", "ACCELERATE_"))}
    if use_cpu:
        env["ACCELERATE_USE_CPU"] = "true"
    env["OMP_NUM_THREADS"] = "1"
    return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(name, launcher, script, use_cpu=True):
    """Start one child launch; each of its processes writes a JSON file into its own folder."""
    out = pathlib.Path(workdir, name)
    out.mkdir()
    command = [sys.executable, "-m", *launcher, script, str(out)]
    return out, subprocess.Popen(command, env=clean_env(use_cpu), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)


def finish(name, out, child):
    _, stderr = child.communicate(timeout=90)
    if child.returncode != 0:  # show the child's own error, not just its exit code
        raise RuntimeError(f"{name} launch failed ({child.returncode}):\n{stderr[-3000:]}")
    return [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]


# --- accelerate launch: this snippet's own ranks run the function ---
ours = gather_object([{"world": accelerator.num_processes, "type": str(accelerator.distributed_type),
                       "weights": {str(seed): train_weights(accelerator, seed) for seed in (0, 1)}}])

results = None
if accelerator.is_main_process:
    with tempfile.TemporaryDirectory() as workdir:
        script = os.path.join(workdir, "train.py")
        pathlib.Path(script).write_text(CHILD)
        children = {  # both at once: each is mostly the import of torch, in three processes
            "torchrun": start("torchrun", ["torch.distributed.run", "--nproc_per_node", "2",
                                           "--master_port", str(free_port())], script),
            "cpu_flag": start("cpu_flag", ["accelerate.commands.launch", "--cpu", "--num_processes", "2",
                                           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend",
                                           "no"], script, use_cpu=False),
        }
        results = {name: finish(name, *child) for name, child in children.items()}
        results["accelerate"] = ours
accelerator.wait_for_everyone()  # rank 1 waits here while rank 0's children run

if accelerator.is_main_process:
    def weights(launch, seed):
        return torch.tensor([rank["weights"][str(seed)] for rank in results[launch]])

    _claims.at_most(
        "accelerate_launch_and_torchrun_train_alike",
        measured=(weights("accelerate", 0) - weights("torchrun", 0)).abs().max().item(),
        control=(weights("accelerate", 0) - weights("torchrun", 1)).abs().max().item(),
        tolerance=1e-6,
        accelerate_ranks=[(r["world"], r["type"]) for r in results["accelerate"]],
        torchrun_ranks=[(r["world"], r["type"]) for r in results["torchrun"]],
    )
    _claims.equal(
        "cpu_flag_starts_one_process",
        measured=len(results["cpu_flag"]),
        control=len(results["accelerate"]),
        expected=1,
        cpu_flag_ranks=[(r["world"], r["type"]) for r in results["cpu_flag"]],
    )

# The handout's method two, as printed, and with ASCII "--": parse only, start nothing.
handout = torch.distributed.launch.parse_args(["–nproc_per_node", "2", "–use_env", "multi-gpu-accelerate-cls.py"])
ascii_ = torch.distributed.launch.parse_args(["--nproc_per_node", "2", "--use_env", "multi-gpu-accelerate-cls.py"])
_claims.equal(
    "en_dash_flags_become_the_script_name",
    measured=[handout.training_script, str(handout.nproc_per_node), handout.use_env],
    control=[ascii_.training_script, str(ascii_.nproc_per_node), ascii_.use_env],
    expected=["–nproc_per_node", "1", False],
    handout_script_args=handout.training_script_args,
)
# torch.distributed.launch.main carries typing_extensions' @deprecated; torchrun's main does not.
_claims.equal(
    "torch_distributed_launch_is_deprecated",
    measured="Use torchrun" in (getattr(torch.distributed.launch.main, "__deprecated__", None) or ""),
    control="Use torchrun" in (getattr(torch.distributed.run.main, "__deprecated__", None) or ""),
    expected=True,
    message=getattr(torch.distributed.launch.main, "__deprecated__", None),
)
