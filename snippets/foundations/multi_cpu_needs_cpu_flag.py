# What Accelerator() makes of a launcher's variables on a host without GPUs, and what prepare() returns.
#   1. torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE=2, MASTER_ADDR/PORT) and a plain Accelerator():
#      each process settles on DistributedType.NO with 1 process, i.e. 2 independent runs.
#      Negative control: the same variables with Accelerator(cpu=True): MULTI_CPU, gloo, 2 processes.
#   2. prepare() wraps the model in DistributedDataParallel under MULTI_CPU even when ONE process runs
#      (what `torchrun --nproc_per_node 1` + Accelerator(cpu=True) gives): the MULTI_CPU branch of
#      Accelerator.prepare_model does not look at the number of processes.
#      Negative control: the same single process without cpu=True (DistributedType.NO) gets the Linear back.
#
# Each scenario needs a fresh Accelerator and a fresh process group, so each rank forks ONE child (it
# inherits the imported torch and accelerate: ~0.5 s, no new interpreter) that runs the scenarios in turn
# and sends back what it saw. The two children form their own 2-process world for scenario 1's control.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/foundations/multi_cpu_needs_cpu_flag.py
import multiprocessing
import os
import socket

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.state import AcceleratorState, GradientState

import _claims

accelerator = Accelerator()  # this launch's own world: 2 ranks
rank = accelerator.process_index


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_env(rank, world_size, port):
    """What torchrun puts in a worker's environment (the parts Accelerate reads)."""
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
            "LOCAL_WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}


def scenario(env, cpu):
    """A fresh Accelerator in this (child) process with env as its launcher's variables."""
    # The default process group inherited from the parent shares the parent's sockets: keep a reference
    # (never destroy it: that would touch the parent's connections) and let the new state build its own.
    from torch.distributed import distributed_c10d

    INHERITED.append(distributed_c10d._world.default_pg)
    distributed_c10d._world.default_pg = None
    for name in list(os.environ):
        if name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") or \
                name.startswith(("ACCELERATE_", "TORCHELASTIC_")):
            del os.environ[name]
    os.environ.update(env, OMP_NUM_THREADS="1")
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    child = Accelerator(cpu=cpu)
    model = child.prepare(torch.nn.Linear(4, 1))
    if dist.is_initialized() and dist.get_world_size() > 1:
        # Rank 0's child hosts this world's store: without DDP's broadcast (the mutant's world) it could
        # move on and exit while rank 1's child still talks to it ("Connection reset by peer").
        dist.barrier()
    return {"type": str(child.distributed_type), "processes": child.num_processes, "model": type(model).__name__,
            "torch_world_size": dist.get_world_size() if dist.is_initialized() else None}


INHERITED = []


def child_main(conn, shared_ports):
    try:
        # This proof is about a host WITHOUT GPUs; on a GPU machine the child pretends to be one.
        torch.cuda.is_available = lambda: False
        seen = {
            # 1: torchrun's variables for 2 processes, plain Accelerator(). Both ranks' children run it
            # at once: PartialState still calls init_process_group (torch sees a world of 2) but settles
            # on DistributedType.NO and 1 process.
            "plain_world_2": scenario(torchrun_env(rank, 2, shared_ports[0]), cpu=False),
            # 2: one process (torchrun --nproc_per_node 1), without and with cpu=True
            "plain_world_1": scenario(torchrun_env(0, 1, free_port()), cpu=False),
            "cpu_world_1": scenario(torchrun_env(0, 1, free_port()), cpu=True),
            # last, because the two ranks' children must meet here: a real 2-process gloo world
            "cpu_world_2": scenario(torchrun_env(rank, 2, shared_ports[1]), cpu=True),
        }
        conn.send(seen)
    except BaseException as error:  # report it; the parent raises it with this rank's name
        conn.send({"error": repr(error)})
    finally:
        os._exit(0)  # no teardown: the inherited process group's sockets belong to the parent


ports = [free_port(), free_port()]
dist.broadcast_object_list(ports, src=0)  # the two children meet on these ports, once per 2-process scenario
context = multiprocessing.get_context("fork")
receiver, sender = context.Pipe(duplex=False)
process = context.Process(target=child_main, args=(sender, ports))
process.start()
try:
    if not receiver.poll(60):
        raise TimeoutError(f"rank {rank}: the forked child sent nothing in 60 s")
    seen = receiver.recv()
finally:
    process.join(5)
    if process.is_alive():
        process.kill()
        process.join()
if "error" in seen:
    raise RuntimeError(f"rank {rank}: the forked child failed: {seen['error']}")

plain, with_cpu = seen["plain_world_2"], seen["cpu_world_2"]
_claims.equal(
    "torchrun_without_cpu_flag_gives_independent_runs",
    measured=[plain["type"], plain["processes"]],
    control=[with_cpu["type"], with_cpu["processes"]],
    expected=["DistributedType.NO", 1],
    world_size_in_environment=2,
    torch_world_size_without_cpu_flag=plain["torch_world_size"],
    model_prepared_as=plain["model"],
    model_prepared_as_with_cpu_flag=with_cpu["model"],
)
one, one_plain = seen["cpu_world_1"], seen["plain_world_1"]
_claims.equal(
    "multi_cpu_wraps_ddp_around_one_process",
    measured=[one["type"], one["processes"], one["model"]],
    control=[one_plain["type"], one_plain["processes"], one_plain["model"]],
    expected=["DistributedType.MULTI_CPU", 1, "DistributedDataParallel"],
)
