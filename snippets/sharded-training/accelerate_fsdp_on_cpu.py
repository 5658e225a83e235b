# What `accelerate launch --use_fsdp` really gives you on a CPU-only machine (Accelerate 1.15).
# We build the exact environment the launcher would hand its processes (its own argument parser and
# prepare_multi_gpu_env, no child launch), then create the Accelerator the script would create:
#   --fsdp_version 2: no error, no warning, distributed_type MULTI_CPU, prepare() wraps the model in DDP:
#                     every rank holds the full model. AcceleratorState turns FSDP on only for GPU-like
#                     types. The same with Accelerator(fsdp_plugin=FullyShardedDataParallelPlugin(...)).
#   --fsdp_version 1: FullyShardedDataParallelPlugin() raises, because the launcher defaults
#                     FSDP_SYNC_MODULE_STATES=true and that needs a CUDA/XPU/... device.
#   torch's own fully_shard on the same ranks shards over the gloo process group, and one forward and backward
#   through it gives the plain model's output and gradients (FSDP does not need NCCL).
#   --cpu --use_fsdp:  the launcher's own validation refuses the combination (ValueError).
# Negative controls: the same Accelerator and prepare() with the state switched to FSDP, as
# AcceleratorState does for MULTI_GPU (FSDPSequential, half the parameters each; the type reported is
# AcceleratorState's own, read before the switch); the version-1 environment with FSDP_SYNC_MODULE_STATES and
# FSDP_CPU_RAM_EFFICIENT_LOADING false (no error); the same model without fully_shard (whole, 1.0);
# --use_fsdp without --cpu (accepted).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/sharded-training/accelerate_fsdp_on_cpu.py
import contextlib
import copy
import logging
import os
import warnings

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.commands.launch import _validate_launch_command, launch_command_parser
from accelerate.state import AcceleratorState, PartialState
from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin
from accelerate.utils.launch import prepare_multi_gpu_env
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

import _claims

accelerator = Accelerator()  # the harness's state: MULTI_CPU, gloo, 2 ranks
world = accelerator.num_processes
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))
elements = sum(p.numel() for p in model.parameters())


def launcher_env(version):
    """The FSDP variables `accelerate launch --use_fsdp --fsdp_version N` exports to each process."""
    argv = ["--use_fsdp", "--fsdp_version", str(version), "--num_processes", str(world), "train.py"]
    args, _, _ = _validate_launch_command(launch_command_parser().parse_args(argv))
    env = prepare_multi_gpu_env(args)
    return {key: value for key, value in env.items() if key.startswith(("FSDP_", "ACCELERATE_USE_FSDP"))}


def share_held(net):
    """Fraction of the model's elements this rank stores."""
    return sum((p.to_local() if isinstance(p, DTensor) else p).numel() for p in net.parameters()) / elements


@contextlib.contextmanager
def messages_about_fsdp(found):
    """Collect the warnings and log records (WARNING or worse) emitted inside that mention FSDP."""
    collected = []

    class Collect(logging.Handler):
        def emit(self, record):
            collected.append(record.getMessage())

    handler = Collect(logging.WARNING)
    logging.getLogger().addHandler(handler)  # accelerate's and torch's loggers propagate to the root
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
        collected.extend(str(caught_warning.message) for caught_warning in caught)
    finally:
        logging.getLogger().removeHandler(handler)
        found.extend(message for message in collected if "fsdp" in message.lower() or "shard" in message.lower())


def prepare_model_and_optimizer(acc):
    """What a training script passes to prepare(): the model with its optimizer (FSDP2 requires both)."""
    net = copy.deepcopy(model)
    net, _ = acc.prepare(net, torch.optim.SGD(net.parameters(), lr=0.1))
    return net


def accelerator_under(env, **kwargs):
    """A fresh Accelerator in this process, as a launched script would make it under `env`."""
    AcceleratorState._reset_state(reset_partial_state=False)  # keep the process group, rebuild the state
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        return Accelerator(**kwargs), None
    except Exception as error:  # noqa: BLE001  the error is what we measure
        return None, f"{type(error).__name__}: {error}"
    finally:
        os.environ.clear()
        os.environ.update(saved)


env_v2, env_v1 = launcher_env(2), launcher_env(1)

# --- version 2: silently plain DDP ------------------------------------------------------------------
v2_messages = []
with messages_about_fsdp(v2_messages):
    acc_v2, error_v2 = accelerator_under(env_v2)
    prepared = prepare_model_and_optimizer(acc_v2)
v2_type, v2_wrapper = str(acc_v2.distributed_type).split(".")[-1], type(prepared).__name__
v2_share = share_held(prepared)

# the same with a plugin object in code, not the launcher
plugin_messages = []
with messages_about_fsdp(plugin_messages):
    acc_plugin, error_plugin = accelerator_under({}, fsdp_plugin=FullyShardedDataParallelPlugin(fsdp_version=2))
    prepared_plugin = prepare_model_and_optimizer(acc_plugin)
plugin_type = str(acc_plugin.distributed_type).split(".")[-1]
plugin_wrapper, plugin_share = type(prepared_plugin).__name__, share_held(prepared_plugin)

# --- control: the same Accelerator, its state switched to FSDP as AcceleratorState does for MULTI_GPU ---
def prepared_with_fsdp_switched_on(env, **kwargs):
    """The same calls with the mechanism removed: AcceleratorState's FSDP switch applied to MULTI_CPU ranks.

    AcceleratorState.__init__ sets distributed_type FSDP and keeps the plugin only inside its branch for
    GPU-like types (and hands the type on to PartialState); here the state gets them after the fact, and the
    same prepare() runs. The distributed type reported is the one AcceleratorState computed, read before the
    switch: the type the snippet sets itself would differ from MULTI_CPU whatever prepare() did, so only what
    prepare() returns (wrapper, share held) and the messages can make the control differ from the bound."""
    found = []
    with messages_about_fsdp(found):
        acc, _ = accelerator_under(env, **kwargs)
        kind = str(acc.distributed_type).split(".")[-1]  # AcceleratorState's own decision (MULTI_CPU here)
        saved = dict(os.environ)
        os.environ.update(env)
        try:  # the plugin Accelerator built from the environment (or was given) and the state dropped
            plugin = kwargs.get("fsdp_plugin") or FullyShardedDataParallelPlugin()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        acc.state.distributed_type, acc.state.fsdp_plugin = DistributedType.FSDP, plugin
        PartialState._shared_state["distributed_type"] = DistributedType.FSDP  # as the end of __init__ does
        try:
            net = prepare_model_and_optimizer(acc)
        finally:
            PartialState._shared_state["distributed_type"] = DistributedType.MULTI_CPU  # the ranks' own type
    return [kind, type(net).__name__, round(share_held(net), 3), len(found)]


control_v2 = prepared_with_fsdp_switched_on(env_v2)
control_plugin = prepared_with_fsdp_switched_on({}, fsdp_plugin=FullyShardedDataParallelPlugin(fsdp_version=2))

# --- version 1: the plugin built from the launcher's environment raises ------------------------------
_, error_v1 = accelerator_under(env_v1)
# cpu_ram_efficient_loading (also a launcher default) would force sync_module_states back on
_, error_v1_no_sync = accelerator_under(
    {**env_v1, "FSDP_SYNC_MODULE_STATES": "false", "FSDP_CPU_RAM_EFFICIENT_LOADING": "false"}
)
AcceleratorState._reset_state(reset_partial_state=False)
Accelerator()  # leave the plain state behind, as we found it

# --- torch's FSDP2 on the same CPU ranks does shard (over gloo) ------------------------------------------
torch_messages, torch_error = [], None
cpu_mesh = init_device_mesh("cpu", (world,))
backend = dist.get_backend(cpu_mesh.get_group())  # the process group fully_shard communicates over
with messages_about_fsdp(torch_messages):
    torch_fsdp = copy.deepcopy(model)
    try:
        fully_shard(torch_fsdp, mesh=cpu_mesh)
    except Exception as error:  # noqa: BLE001  a refusal is what the gloo claim would measure
        torch_error = f"{type(error).__name__}: {error}"
torch_result = [torch_error or type(torch_fsdp).__name__, None if torch_error else round(share_held(torch_fsdp), 3)]


def step_matches_plain(net):
    """One forward and backward of `net` on a fixed batch: output and full gradients equal the plain model's?

    Each FSDP rank holds half the parameters, so a right output needs the all-gather, and a right gradient
    the reduce-scatter, over the mesh's process group (gloo here)."""
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(0))
    plain = copy.deepcopy(model)  # the reference: the whole model FSDP holds (ranks' `model` inits may differ)
    with torch.no_grad():
        for q, p in zip(plain.parameters(), net.parameters()):
            q.copy_(p.full_tensor() if isinstance(p, DTensor) else p)
    plain_out = plain(x)
    plain_out.sum().backward()
    out = net(x)
    out.sum().backward()
    full = [p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad for p in net.parameters()]
    return torch.allclose(out, plain_out, atol=1e-6) and all(
        torch.allclose(g, q.grad, atol=1e-6) for g, q in zip(full, plain.parameters())
    )


torch_step = None if torch_error else step_matches_plain(torch_fsdp)

# --- the launcher refuses --cpu together with --use_fsdp -----------------------------------------------
def launcher_refuses(argv):
    """The error accelerate launch's own validation raises for these flags, or None if it accepts them."""
    try:
        _validate_launch_command(launch_command_parser().parse_args(argv))
    except ValueError as error:
        return str(error)
    return None


fsdp_argv = ["--use_fsdp", "--fsdp_version", "2", "--num_processes", str(world), "train.py"]
refused_with_cpu, refused_without_cpu = launcher_refuses(["--cpu", *fsdp_argv]), launcher_refuses(fsdp_argv)

_claims.equal(
    "fsdp2_request_runs_as_ddp_on_cpu",
    measured=[v2_type, v2_wrapper, round(v2_share, 3), len(v2_messages)],  # len: warnings/logs about FSDP
    control=control_v2,  # the same calls, FSDP switched on in the state after AcceleratorState decided
    expected=["MULTI_CPU", "DistributedDataParallel", 1.0, 0],
    launcher_env=env_v2,
    error=error_v2,
    messages=v2_messages,
)
_claims.equal(
    "fsdp2_plugin_in_code_runs_as_ddp_on_cpu",
    measured=[plugin_type, plugin_wrapper, round(plugin_share, 3), len(plugin_messages)],
    control=control_plugin,
    expected=["MULTI_CPU", "DistributedDataParallel", 1.0, 0],
    error=error_plugin,
    messages=plugin_messages,
)
_claims.equal(
    "fsdp1_launch_env_errors_on_cpu",
    measured=error_v1 is not None and "no available devices" in error_v1,
    control=error_v1_no_sync is not None and "no available devices" in error_v1_no_sync,
    expected=True,
    error=error_v1,
    launcher_sync_module_states=env_v1.get("FSDP_SYNC_MODULE_STATES"),
    launcher_cpu_ram_efficient_loading=env_v1.get("FSDP_CPU_RAM_EFFICIENT_LOADING"),
    error_without_sync=error_v1_no_sync,
)
_claims.equal(
    "torch_fully_shard_shards_on_gloo",
    measured=[backend, *torch_result, torch_step],  # torch's fully_shard on a CPU mesh whose process group is gloo
    # the same model, fully_shard not called (its step is the plain model's own)
    control=[backend, type(model).__name__, round(share_held(model), 3), step_matches_plain(copy.deepcopy(model))],
    expected=["gloo", "FSDPSequential", 0.5, True],
    error=torch_error,
)
_claims.equal(
    "launcher_refuses_cpu_with_fsdp",
    measured=refused_with_cpu is not None and "You can only use one of" in refused_with_cpu,
    control=refused_without_cpu is not None and "You can only use one of" in refused_without_cpu,  # no --cpu
    expected=True,
    error=refused_with_cpu,
    error_without_cpu=refused_without_cpu,
)
