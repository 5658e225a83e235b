"""Mutants for the collectives pages: the library behaving the way the wrong answers say."""

from verify.mutation import mutant


@mutant("all-reduce-averages", "all_reduce with the default op returns the mean of the ranks' tensors, not their sum")
def all_reduce_averages(patch):
    import torch.distributed as dist

    def average(original, tensor, *args, **kwargs):
        work = original(tensor, *args, **kwargs)
        tensor.div_(dist.get_world_size())
        return work

    patch.wrap(dist, "all_reduce", average)


@mutant("reduce-scatter-skips-the-reduction", "reduce_scatter hands each rank its own chunk without adding the other ranks'")
def reduce_scatter_skips_the_reduction(patch):
    import torch.distributed as dist

    def own_chunk(original, output, input, *args, **kwargs):
        output.copy_(input.chunk(dist.get_world_size())[dist.get_rank()])

    patch.wrap(dist, "reduce_scatter_tensor", own_chunk)


@mutant("all-gather-repeats-the-local-chunk", "all_gather fills every slot with the calling rank's own chunk")
def all_gather_repeats_the_local_chunk(patch):
    import torch.distributed as dist

    def repeat(original, output, input, *args, **kwargs):
        output.copy_(input.repeat(dist.get_world_size()))

    patch.wrap(dist, "all_gather_into_tensor", repeat)


@mutant("ddp-does-not-wait-for-peers", "DDP's gradient all-reduce returns at once: fast ranks run ahead of a slow one")
def ddp_does_not_wait_for_peers(patch):
    import torch
    from torch.nn.parallel import DistributedDataParallel

    def no_communication(state, bucket):  # a comm hook that completes immediately with the local gradient
        future = torch.futures.Future()
        future.set_result(bucket.buffer())
        return future

    def init(original, self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.register_comm_hook(None, no_communication)

    patch.wrap(DistributedDataParallel, "__init__", init)
