"""Mutants for launching: the library bugs that the wrong answers on these pages describe.

How a launcher sets up the processes, which backend Accelerate picks, how a timeout reaches the process
group, done the way a wrong answer says, applied in every rank for one run of a snippet.
"""
from verify.mutation import mutant


@mutant("accelerate-always-uses-nccl",
        "Accelerate's backend choice names nccl whatever the device, for CPU processes too")
def accelerate_always_uses_nccl(patch):
    from accelerate import PartialState

    def prepare_backend(original, self, *args, **kwargs):
        backend, distributed_type = original(self, *args, **kwargs)
        return "nccl", distributed_type

    patch.wrap(PartialState, "_prepare_backend", prepare_backend)


@mutant("nccl-serves-cpu-tensors",
        "a process group created with backend \"nccl\" also gets a backend for CPU tensors (NCCL on CPU, just slower)")
def nccl_serves_cpu_tensors(patch):
    from torch.distributed.distributed_c10d import BackendConfig

    def init(original, self, backend):
        original(self, backend)
        if str(backend) == "nccl":
            self.device_backend_map["cpu"] = "nccl"

    patch.wrap(BackendConfig, "__init__", init)


@mutant("all-reduce-sum-averages",
        "all_reduce with the default ReduceOp.SUM divides by the world size (it averages, as DDP's gradients are)")
def all_reduce_sum_averages(patch):
    import torch.distributed as dist

    def all_reduce(original, tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        work = original(tensor, op, group=group, async_op=async_op)
        if op == dist.ReduceOp.SUM and not async_op:
            tensor /= dist.get_world_size(group)
        return work

    patch.wrap(dist, "all_reduce", all_reduce)
