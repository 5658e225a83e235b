# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     notebook_metadata_filter: proof
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
#   proof:
#     title: Two notebook_launcher workers all-reduce their rank + 1
#     processes: 2
#     timeout: 90
#     claims:
#       workers_sum_their_ranks:
#         says: all_reduce over 2 workers gives 1 + 2 = 3
#         control: each worker keeps its own value (no all-reduce)
#         breaks_when: [all-reduce-takes-the-max, broadcast-does-nothing]
# ---

# %%
import json
import os
import pathlib
import socket
import tempfile

import torch
import torch.distributed as dist
from accelerate import Accelerator, notebook_launcher

import _claims

os.environ["ACCELERATE_USE_CPU"] = "true"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def work(results_dir, reduce):
    accelerator = Accelerator()
    value = torch.tensor([accelerator.process_index + 1.0])
    if reduce:
        dist.all_reduce(value)
    world = {"rank": accelerator.process_index, "world_size": dist.get_world_size(),
             "num_processes": accelerator.num_processes, "backend": accelerator.state.backend,
             "distributed_type": str(accelerator.distributed_type).split(".")[-1], "device": str(accelerator.device)}
    pathlib.Path(results_dir, f"{accelerator.process_index}.json").write_text(json.dumps({"world": world, "value": value.item()}))


def launch(reduce):
    with tempfile.TemporaryDirectory() as results_dir:
        notebook_launcher(work, args=(results_dir, reduce), num_processes=2, use_port=free_port())
        return sorted((json.loads(p.read_text()) for p in pathlib.Path(results_dir).glob("*.json")),
                      key=lambda found: found["world"]["rank"])


# %%
summed, alone = launch(True), launch(False)
_claims.equal("workers_sum_their_ranks", measured=summed[0]["value"], control=alone[0]["value"], expected=3.0,
              world=[found["world"] for found in summed])
