"""Mutants for the harness's own tests: one caught, one harmless, one never reached, one that crashes."""
from verify.mutation import mutant


@mutant("all-reduce-takes-the-max", "all_reduce returns the largest value instead of the sum")
def all_reduce_takes_the_max(patch):
    import torch.distributed as dist

    patch.wrap(dist, "all_reduce", lambda original, tensor, *a, **k: original(tensor, dist.ReduceOp.MAX))


@mutant("all-reduce-unchanged", "all_reduce wrapped but still sums (a mutant the claim cannot catch)")
def all_reduce_unchanged(patch):
    import torch.distributed as dist

    patch.wrap(dist, "all_reduce", lambda original, *a, **k: original(*a, **k))


@mutant("broadcast-does-nothing", "broadcast leaves every rank's tensor as it was")
def broadcast_does_nothing(patch):
    import torch.distributed as dist

    patch.wrap(dist, "broadcast", lambda original, tensor, *a, **k: None)


@mutant("all-reduce-raises", "all_reduce raises instead of reducing")
def all_reduce_raises(patch):
    import torch.distributed as dist

    def fail(original, *args, **kwargs):
        raise RuntimeError("all_reduce broken on purpose")

    patch.wrap(dist, "all_reduce", fail)
