# With the static rendezvous (torchrun's and `accelerate launch`'s default), the machines need not start
# in any order: machine 0's agent hosts a TCPStore at --main_process_ip:--main_process_port, and an agent
# that arrives before that store is up keeps trying to connect until it is (StaticTCPRendezvous in
# torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py). Its rank is the --machine_rank it was
# given, not its place in the arrival order.
# This snippet's ranks 0 and 1 play the agents of machines 0 and 1: each builds the handler the launcher
# builds (rendezvous registry, backend "static", as torch.distributed.launcher.api.launch_agent does) and
# calls next_rendezvous. Round 1: machine 1 starts 0.5 s before machine 0. Negative control, round 2:
# machine 0 starts first and machine 1 0.5 s later, so the store is already up when machine 1 arrives.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/launching/static_rendezvous_order.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import socket
import time

import torch.distributed as dist
import torch.distributed.elastic.rendezvous.registry as rdzv_registry
from accelerate import Accelerator
from torch.distributed.elastic.rendezvous import RendezvousParameters

import _claims

HEAD_START_S = 0.5
accelerator = Accelerator()
rank = accelerator.process_index
machine = rank if rank < 2 else None  # ranks 0 and 1 are the agents of machines 0 and 1


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


ports = [free_port(), free_port()] if rank == 0 else [None, None]  # one rendezvous endpoint per round
dist.broadcast_object_list(ports, src=0)
handlers = []  # kept until the end: machine 0's handler holds the store the other one connected to


def rendezvous(port, starts_first):
    """[rank, world size, seconds] that this machine's static rendezvous returned, or [None, None, error]."""
    handler = rdzv_registry.get_rendezvous_handler(RendezvousParameters(
        backend="static", endpoint=f"127.0.0.1:{port}", run_id="job", min_nodes=2, max_nodes=2,
        rank=machine, timeout=30,  # what torchrun passes: rank = --node_rank (accelerate: --machine_rank)
    ))  # fmt: skip
    handlers.append(handler)
    dist.barrier()
    if machine != starts_first:
        time.sleep(HEAD_START_S)
    started = time.perf_counter()
    try:
        info = handler.next_rendezvous()
        return [info.rank, info.world_size, time.perf_counter() - started]
    except Exception as error:  # noqa: BLE001
        failed = [None, None, f"{type(error).__name__} after {time.perf_counter() - started:.2f} s"]
    # This machine gave up: join once machine 0's store answers (as restarting it would), so that the
    # other machine, which waits for it, is released too.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            handler.next_rendezvous()
            break
        except Exception:  # noqa: BLE001
            time.sleep(0.1)
    return failed


if machine is not None:
    machine_1_first = rendezvous(ports[0], starts_first=1)
    machine_0_first = rendezvous(ports[1], starts_first=0)
else:  # a third rank, if any, only keeps the barriers company
    dist.barrier()
    dist.barrier()


def waited_for_the_other(result):
    return [result[0], result[1], isinstance(result[2], float) and result[2] >= 0.8 * HEAD_START_S]


both = [None] * accelerator.num_processes  # machine 0's side of the same rounds, for the record
dist.all_gather_object(both, [machine_1_first, machine_0_first] if machine is not None else None)
if machine == 1:
    _claims.equal(
        "machine_started_before_machine_0_waits_for_it",
        measured=waited_for_the_other(machine_1_first),  # [rank, world size, waited >= 0.8 x the head start]
        control=waited_for_the_other(machine_0_first),  # machine 0's store already up when machine 1 arrives
        expected=[1, 2, True],
        machine_1_seconds=[machine_1_first[2], machine_0_first[2]],  # [started first, started second]
        machine_0_result_started_second=both[0][0],
        machine_0_result_started_first=both[0][1],
    )
dist.barrier()
handlers.clear()
