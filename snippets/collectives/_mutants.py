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


@mutant("new-group-named-by-its-ranks",
        "new_group names a group by its rank list, not by a per-rank call counter: a rank may skip groups it is not in")
def new_group_named_by_its_ranks(patch):
    import torch.distributed.distributed_c10d as c10d

    made = {}  # per rank list: how many groups with that list this rank has named, so names stay unique

    def by_ranks(original, ranks, use_hashed_name):
        if not ranks:  # the default group keeps its name
            return original(ranks, use_hashed_name)
        key = tuple(ranks)
        made[key] = made.get(key, 0) + 1
        return c10d.GroupName(f"ranks_{'_'.join(map(str, key))}_{made[key]}")

    patch.wrap(c10d, "_process_group_name", by_ranks)


@mutant("reduce-scatter-single-skips-the-reduction",
        "reduce_scatter_single (torch 2.13's name) hands each rank its own chunk without adding the other ranks'")
def reduce_scatter_single_skips_the_reduction(patch):
    import torch.distributed as dist

    def own_chunk(original, output, input, *args, **kwargs):
        output.copy_(input.chunk(dist.get_world_size())[dist.get_rank()])

    patch.wrap(dist, "reduce_scatter_single", own_chunk)


@mutant("all-gather-single-repeats-the-local-chunk",
        "all_gather_single (torch 2.13's name) fills every slot with the calling rank's own chunk")
def all_gather_single_repeats_the_local_chunk(patch):
    import torch.distributed as dist

    def repeat(original, output, input, *args, **kwargs):
        output.copy_(input.repeat(dist.get_world_size()))

    patch.wrap(dist, "all_gather_single", repeat)


# --- collectives/bus-bandwidth: collectives that move more bytes than the bus factor says ---

@mutant("all-reduce-is-reduce-then-broadcast",
        "all_reduce is a reduce to one rank followed by a broadcast from it, not a ring or tree over all links")
def all_reduce_is_reduce_then_broadcast(patch):
    import torch.distributed as dist

    def reduce_then_broadcast(original, tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        root = dist.get_global_rank(group, 0) if group is not None else 0
        dist.reduce(tensor, dst=root, op=op, group=group)
        dist.broadcast(tensor, src=root, group=group)

    patch.wrap(dist, "all_reduce", reduce_then_broadcast)


@mutant("all-gather-single-via-all-reduce",
        "all_gather_single zero-fills the output, puts the local shard in its slot and all-reduces the whole buffer")
def all_gather_single_via_all_reduce(patch):
    import torch.distributed as dist

    def by_all_reduce(original, output, input, group=None, async_op=False):
        output.zero_()
        output.chunk(dist.get_world_size(group))[dist.get_rank(group)].copy_(input)
        dist.all_reduce(output, group=group)

    patch.wrap(dist, "all_gather_single", by_all_reduce)
