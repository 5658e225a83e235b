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


@mutant("rowwise-parallel-skips-all-reduce", "a row-parallel Linear returns its rank's partial sum without the all-reduce")
def rowwise_parallel_skips_all_reduce(patch):
    from torch.distributed.tensor.parallel import RowwiseParallel

    def partial_sum(original, output_layouts, use_local_output, mod, outputs, device_mesh):
        return outputs.to_local()  # the Partial placement is never redistributed: no all-reduce

    patch.wrap(RowwiseParallel, "_prepare_output_fn", partial_sum)


@mutant("colwise-parallel-replicates-weights", "a column-parallel Linear keeps the whole weight on every rank")
def colwise_parallel_replicates_weights(patch):
    import torch
    from torch.distributed.tensor import Replicate, distribute_tensor
    from torch.distributed.tensor.parallel import ColwiseParallel

    def replicate(original, self, name, module, device_mesh):
        for param_name, param in list(module.named_parameters()):
            replicated = torch.nn.Parameter(distribute_tensor(param, device_mesh, [Replicate()]))
            module.register_parameter(param_name, replicated)

    patch.wrap(ColwiseParallel, "_partition_linear_fn", replicate)


@mutant("new-group-is-the-world", "dist.new_group returns the default group: a subgroup collective involves every rank")
def new_group_is_the_world(patch):
    import torch.distributed as dist

    def world(original, *args, **kwargs):
        original(*args, **kwargs)  # every rank still takes part in creating it, as the real call requires
        return dist.group.WORLD

    patch.wrap(dist, "new_group", world)


@mutant("async-collective-blocks", "all_reduce(async_op=True) blocks until the collective is done, like the plain call")
def async_collective_blocks(patch):
    import torch.distributed as dist

    def blocking(original, tensor, *args, async_op=False, **kwargs):
        work = original(tensor, *args, async_op=async_op, **kwargs)
        if async_op:
            work.wait()
        return work

    patch.wrap(dist, "all_reduce", blocking)


@mutant("work-wait-does-not-wait", "work.wait() after an async all_reduce returns before the result has arrived")
def work_wait_does_not_wait(patch):
    import torch.distributed as dist

    class Unwaited:
        def __init__(self, work):
            self.work = work

        def wait(self, *args, **kwargs):
            patch.ran()
            return True  # the real work finishes in the background, later

    def unwaited(original, tensor, *args, async_op=False, **kwargs):
        work = original(tensor, *args, async_op=async_op, **kwargs)
        return Unwaited(work) if async_op else work

    patch.wrap(dist, "all_reduce", unwaited)


@mutant("all-to-all-keeps-local-data", "all_to_all_single copies each rank's own input to its output: nothing is exchanged")
def all_to_all_keeps_local_data(patch):
    import torch.distributed as dist

    patch.wrap(dist, "all_to_all_single", lambda original, output, input, *args, **kwargs: output.copy_(input))


@mutant("p2p-exchange-delivers-own-data", "batch_isend_irecv completes, but each receive buffer gets the rank's own outgoing tensor")
def p2p_exchange_delivers_own_data(patch):
    import torch.distributed as dist

    def loopback(original, ops):
        sends = [op.tensor for op in ops if op.op is dist.isend]
        receives = [op.tensor for op in ops if op.op is dist.irecv]
        for sent, buffer in zip(sends, receives):
            buffer.copy_(sent)
        return []

    patch.wrap(dist, "batch_isend_irecv", loopback)


@mutant("fsdp2-shards-nothing", "FSDP2's fully_shard leaves every parameter whole on every rank")
def fsdp2_shards_nothing(patch):
    import torch.distributed.fsdp

    patch.wrap(torch.distributed.fsdp, "fully_shard", lambda original, module, *args, **kwargs: module)
