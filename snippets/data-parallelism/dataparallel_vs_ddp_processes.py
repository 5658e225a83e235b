# DataParallel vs DistributedDataParallel, as far as a GPU-less machine can show it.
# DDP: one process per replica; its backward all-reduces the gradients between the processes.
# DataParallel: a single-process wrapper. Without GPUs its forward just calls the module
# (`if not self.device_ids: return self.module(...)` in torch/nn/parallel/data_parallel.py); with
# GPUs it scatters the batch, replicates the module and runs the replicas in threads
# (parallel_apply), which needs an accelerator: on CPU that step raises.
# Negative controls: the same measurement with DataParallel in place of DDP (one process, no
# communication between processes); DataParallel's own forward, which skips parallel_apply here.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/data-parallelism/dataparallel_vs_ddp_processes.py
import copy
import os

import torch
import torch.distributed as dist
from accelerate import Accelerator
from torch.nn.parallel import parallel_apply

import _claims

accelerator = Accelerator()
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
torch.manual_seed(1 + accelerator.process_index)  # each rank its own batch
x, y = torch.randn(16, 8), torch.randn(16, 1)


def step(wrapped):
    """One forward/backward; returns the pids that ran forward (world-wide) and the rank-0 vs rank-1 gap."""
    pids = []
    hook = wrapped.module.register_forward_hook(lambda *_: pids.append(os.getpid()))
    torch.nn.functional.mse_loss(wrapped(x), y).backward()
    hook.remove()
    everyone = [None] * accelerator.num_processes
    dist.all_gather_object(everyone, pids)
    grads = [torch.zeros_like(wrapped.module.weight.grad) for _ in range(accelerator.num_processes)]
    dist.all_gather(grads, wrapped.module.weight.grad)
    return sorted({pid for rank_pids in everyone for pid in rank_pids}), (grads[0] - grads[1]).abs().max().item()


ddp_pids, ddp_gap = step(accelerator.prepare(copy.deepcopy(model)))  # DistributedDataParallel
data_parallel = torch.nn.DataParallel(copy.deepcopy(model))  # found no GPU: device_ids == []
dp_pids, dp_gap = step(data_parallel)  # each rank runs its own, unrelated DataParallel
dp_output_gap = (data_parallel(x) - model(x)).abs().max().item()


def raises(call):
    try:
        call()
        return ""
    except RuntimeError as error:
        return str(error)


# DataParallel's multi-replica step, run on two CPU copies: threads need an accelerator device.
parallel_apply_error = raises(lambda: parallel_apply([model, copy.deepcopy(model)], [(x[:8],), (x[8:],)]))
dataparallel_error = raises(lambda: data_parallel(x))

_claims.at_most(
    "ddp_averages_across_processes_dataparallel_does_not",
    measured=ddp_gap,  # rank 0 vs rank 1 gradient after one backward on different data
    control=dp_gap,
    tolerance=1e-7,
    ddp_processes_that_ran_forward=len(ddp_pids),
    dataparallel_processes_that_ran_forward=len(dp_pids),
)
_claims.equal(
    "dataparallel_replica_threads_need_an_accelerator",
    measured=int(bool(parallel_apply_error)),
    control=int(bool(dataparallel_error)),
    expected=1,
    parallel_apply_error=parallel_apply_error[:200],
    dataparallel_device_ids=list(data_parallel.device_ids),
    dataparallel_output_minus_module_output=dp_output_gap,
)
