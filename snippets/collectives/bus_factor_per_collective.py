# Why nccl-tests multiplies the algorithm bandwidth S/t by 2(n-1)/n for all-reduce, (n-1)/n for
# all-gather and reduce-scatter, and 1 for broadcast: the factor is the bytes each rank's link must
# carry per byte of the collective's size S. On gloo groups of 2, 3 and 4 processes this counts the bytes
# each rank's process really writes to its sockets (/proc/self/io wchar) during one call of each
# collective and divides by S. Three claims:
#  * all_reduce writes 2(p-1)/p * S per rank (control: the all-gather of the same S, half of it);
#  * all_gather_single writes (p-1)/p * S per rank (control: the all-reduce, twice it);
#  * gloo's reduce_scatter_single writes 2(p-1)/p * S, twice what a bandwidth-optimal reduce-scatter
#    needs: the busbw formula assumes the optimal algorithm, so a backend that moves more reads as a
#    slower link (control: the all-gather, which is optimal).
# S is the whole array, as in nccl-tests: the all-reduce's tensor, the all-gather's output, the
# reduce-scatter's input.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 4 --main_process_port 0 snippets/collectives/bus_factor_per_collective.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs; it needs 4 processes)
import torch
import torch.distributed as dist
from accelerate import Accelerator

import _claims

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
ELEMENTS = 3 * 2**16  # 768 KiB of float32, divisible by 2, 3 and 4: equal shards, so the factors are exact
SIZE = ELEMENTS * 4  # S, bytes
GROUP_SIZES = [p for p in (2, 3, 4) if p <= world]


def bytes_written():
    """Bytes this process has passed to write()/writev() so far (gloo's TCP pairs write with writev)."""
    with open("/proc/self/io") as counters:
        return next(int(line.split()[1]) for line in counters if line.startswith("wchar"))


def bytes_per_byte_of_size(collective, group):
    before = bytes_written()
    collective(group)
    return (bytes_written() - before) / SIZE


def all_reduce(group):
    dist.all_reduce(torch.ones(ELEMENTS), group=group)


def all_gather(group):
    p = dist.get_world_size(group)
    dist.all_gather_single(torch.empty(ELEMENTS), torch.ones(ELEMENTS // p), group=group)


def reduce_scatter(group):
    p = dist.get_world_size(group)
    dist.reduce_scatter_single(torch.empty(ELEMENTS // p), torch.ones(ELEMENTS), group=group)


def broadcast(group):
    dist.broadcast(torch.ones(ELEMENTS), src=0, group=group)


COLLECTIVES = {"all_reduce": all_reduce, "all_gather": all_gather, "reduce_scatter": reduce_scatter,
               "broadcast": broadcast}
groups = {p: dist.new_group(ranks=list(range(p))) for p in GROUP_SIZES}  # every rank creates every group
rows = []
for p in GROUP_SIZES:
    row = []
    for collective in COLLECTIVES.values():
        dist.barrier()  # no rank is still writing the previous collective's bytes
        row.append(bytes_per_byte_of_size(collective, groups[p]) if rank < p else float("nan"))
    dist.barrier()
    rows.append(row)

table = torch.tensor(rows, dtype=torch.float64)
every_rank = [torch.empty_like(table) for _ in range(world)]
dist.all_gather(every_rank, table)  # every rank judges every rank's counts
measured = {p: {name: [every_rank[r][i, j].item() for r in range(p)] for j, name in enumerate(COLLECTIVES)}
            for i, p in enumerate(GROUP_SIZES)}


def deviation(name, factor):
    """Largest |bytes per byte of S / factor(p) - 1| over every group size and every rank in it."""
    return max(abs(value / factor(p) - 1) for p in GROUP_SIZES for value in measured[p][name])


def all_reduce_factor(p):
    return 2 * (p - 1) / p


def gather_factor(p):
    return (p - 1) / p


rounded = {p: {name: [round(v, 4) for v in values] for name, values in by_name.items()}
           for p, by_name in measured.items()}
_claims.at_most(
    "all_reduce_sends_the_bus_factor",
    measured=deviation("all_reduce", all_reduce_factor),
    control=deviation("all_gather", all_reduce_factor),
    tolerance=0.02,
    size_bytes=SIZE,
    group_sizes=GROUP_SIZES,
    bytes_per_byte_of_size=rounded,
)
_claims.at_most(
    "all_gather_sends_n_minus_1_over_n",
    measured=deviation("all_gather", gather_factor),
    control=deviation("all_reduce", gather_factor),
    tolerance=0.02,
    size_bytes=SIZE,
)
# gloo's reduce-scatter against the optimal (p-1)/p: its ratio on every rank of every group
reduce_scatter_ratios = [value / gather_factor(p) for p in GROUP_SIZES for value in measured[p]["reduce_scatter"]]
all_gather_ratios = [value / gather_factor(p) for p in GROUP_SIZES for value in measured[p]["all_gather"]]
_claims.between(
    "gloo_reduce_scatter_sends_twice_the_factor",
    measured=min(reduce_scatter_ratios),
    control=min(all_gather_ratios),
    low=1.9,
    high=2.1,
    largest_ratio=max(reduce_scatter_ratios),
    broadcast_root_bytes_per_byte=[rounded[p]["broadcast"][0] for p in GROUP_SIZES],
)
