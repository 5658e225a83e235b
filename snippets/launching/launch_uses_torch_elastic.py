# What `accelerate launch` starts for several processes: its own process becomes a torch elastic
# agent (torch.distributed.run), and every rank is a child of that agent, started with torch
# elastic's environment plus the ACCELERATE_* settings the launcher adds. PyTorch Lightning plays
# no part: Accelerate neither requires nor imports it.
# Negative controls: the launcher's own starting environment holds none of those variables; this
# rank's process keeps its plain name; torch, which Accelerate really uses, is found by the same
# checks that find no Lightning.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/launching/launch_uses_torch_elastic.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import importlib.metadata
import os
import pathlib
import re
import sys

import accelerate
import psutil  # a dependency of accelerate
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
launcher = psutil.Process(os.getppid())  # the process that started this rank

# torch.distributed.run.run() renames its thread "pt_elastic" before it starts the elastic agent,
# so a parent called pt_elastic is running torch elastic's launcher (Linux shows thread names).
_claims.equal(
    "parent_is_torch_elastic_agent",
    measured=launcher.name(),
    control=psutil.Process().name(),
    expected="pt_elastic",
    parent_cmdline=" ".join(launcher.cmdline()[:4]),
)

# Variables written by torch elastic's LocalElasticAgent._start_workers for each worker, and by
# accelerate's prepare_multi_gpu_env. Compare with the launcher's environment when it started.
ELASTIC = [
    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_USE_AGENT_STORE", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE",
    "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
]
ACCELERATE = ["ACCELERATE_MIXED_PRECISION", "ACCELERATE_DYNAMO_BACKEND"]
launcher_env = launcher.environ()
# The environment this rank STARTED with (/proc/<pid>/environ), what the launcher gave it: on MULTI_CPU
# PartialState writes RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (and MASTER_PORT when missing)
# back into os.environ itself, so os.environ cannot tell who set them.
started_with = psutil.Process().environ()
_claims.equal(
    "ranks_get_elastic_and_accelerate_env",
    measured=sum(name in started_with for name in ELASTIC + ACCELERATE),
    control=sum(name in launcher_env for name in ELASTIC + ACCELERATE),
    expected=len(ELASTIC + ACCELERATE),
    run_id=started_with.get("TORCHELASTIC_RUN_ID"),
    restart_count=started_with.get("TORCHELASTIC_RESTART_COUNT"),
    max_restarts=started_with.get("TORCHELASTIC_MAX_RESTARTS"),
    rank=started_with.get("RANK"),
    local_rank=started_with.get("LOCAL_RANK"),
    world_size=started_with.get("WORLD_SIZE"),
    accelerate_vars_added=sorted(k for k in started_with if k.startswith("ACCELERATE_") and k not in launcher_env),
)


# Lightning would show up in one of three places: accelerate's declared requirements, its source
# code, or the modules this rank has imported. Count each for lightning, then for torch.
def footprint(pattern):
    requirements = [r for r in importlib.metadata.requires("accelerate") if re.match(pattern, r)]
    sources = pathlib.Path(accelerate.__file__).parent.rglob("*.py")
    files = [p for p in sources if re.search(rf"^\s*(import|from) {pattern}", p.read_text(encoding="utf-8"), re.M)]
    modules = [m for m in sys.modules if re.match(pattern, m)]
    return len(requirements), len(files), len(modules)


lightning = footprint(r"(pytorch_)?lightning\b")
torch_footprint = footprint(r"torch\b")
_claims.equal(
    "no_lightning_required_imported_or_used",
    measured=sum(lightning),
    control=sum(torch_footprint),
    expected=0,
    lightning_requirements_files_modules=lightning,
    torch_requirements_files_modules=torch_footprint,
    source_files_scanned=sum(1 for _ in pathlib.Path(accelerate.__file__).parent.rglob("*.py")),
)
