"""Mutants for foundations: what Accelerate makes of a launch, and the collectives model parallelism needs,
behaving the way a wrong answer or a plausible regression would have them behave.

Imports of torch and accelerate stay inside the functions: loading this catalogue costs nothing.
"""

from verify.mutation import mutant


@mutant(
    "plain-accelerator-falls-back-to-gloo",
    "on a host without GPUs a plain Accelerator() under a launcher's variables joins the world on gloo "
    "(MULTI_CPU) by itself, without cpu=True or ACCELERATE_USE_CPU",
)
def plain_accelerator_falls_back_to_gloo(patch):
    import os

    import torch
    from accelerate.state import PartialState

    def prepare_backend(original, self, cpu=False, sagemaker_dp=False, backend=None):
        if int(os.environ.get("LOCAL_RANK", -1)) != -1 and not torch.cuda.is_available():
            cpu = True
        return original(self, cpu=cpu, sagemaker_dp=sagemaker_dp, backend=backend)

    patch.wrap(PartialState, "_prepare_backend", prepare_backend)


@mutant(
    "all-gather-returns-local-copies",
    "torch.distributed.all_gather (the list form) fills every slot with this rank's own tensor: nothing arrives from the others",
)
def all_gather_returns_local_copies(patch):
    import torch.distributed as dist

    def local_only(original, tensor_list, tensor, group=None, async_op=False):
        for slot in tensor_list:
            slot.copy_(tensor)
        return None

    patch.wrap(dist, "all_gather", local_only)
