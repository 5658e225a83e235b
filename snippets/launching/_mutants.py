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


def _reached_in_forked_children(patch):
    """Some proofs build their process groups in forked children, whose memory the rank never sees: a
    shared flag set by the mutated code in a child is read back each time the rank joins a child."""
    import multiprocessing
    import multiprocessing.process

    flag = multiprocessing.get_context("fork").RawValue("i", 0)
    original_join = multiprocessing.process.BaseProcess.join

    class Join:  # a descriptor, not a plain function: calling it records nothing by itself
        def __get__(self, instance, owner):
            def join(timeout=None):
                result = original_join(instance, timeout)
                if flag.value:
                    patch.ran()
                return result

            return join

    patch.replace(multiprocessing.process.BaseProcess, "join", Join())

    def mark():
        flag.value = 1
        patch.ran()

    return mark


@mutant("init-kwargs-drop-the-timeout",
        "InitProcessGroupKwargs.to_kwargs leaves the timeout out, so the group keeps torch's default")
def init_kwargs_drop_the_timeout(patch):
    from accelerate.utils import InitProcessGroupKwargs

    def to_kwargs(original, self):
        kwargs = original(self)
        kwargs.pop("timeout", None)
        return kwargs

    patch.wrap(InitProcessGroupKwargs, "to_kwargs", to_kwargs)


@mutant("init-kwargs-pass-their-defaults",
        "InitProcessGroupKwargs() passes every field, its default backend \"nccl\" and timeout included")
def init_kwargs_pass_their_defaults(patch):
    from accelerate.utils import InitProcessGroupKwargs

    patch.wrap(InitProcessGroupKwargs, "to_kwargs", lambda original, self: self.to_dict())


@mutant("gloo-default-timeout-is-10-minutes",
        "torch's default process-group timeout is 10 minutes for gloo too, as for NCCL")
def gloo_default_timeout_is_10_minutes(patch):
    from datetime import timedelta

    import torch.distributed.distributed_c10d as c10d

    mark = _reached_in_forked_children(patch)

    class TenMinutes:  # not a plain function: only mark() records that it ran
        def __call__(self, backend):
            mark()
            return timedelta(minutes=10)

    patch.replace(c10d, "_get_default_timeout", TenMinutes())


@mutant("accelerate-launch-exports-bf16",
        "accelerate launch exports ACCELERATE_MIXED_PRECISION=bf16 to its workers (as a config with mixed_precision: "
        "bf16 does), so a plain Accelerator() under it trains in bf16 where torchrun's workers, which get no "
        "ACCELERATE_* variable, train in fp32")
def accelerate_launch_exports_bf16(patch):
    import accelerate.state as state_module

    patch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")  # what this launch's workers would have been given
    original = state_module.parse_choice_from_env

    class ReadsTheVariable:  # not a plain function: only reading bf16 from the variable records a run
        def __call__(self, key, default="no"):
            value = original(key, default)
            if key == "ACCELERATE_MIXED_PRECISION" and value == "bf16":
                patch.ran()
            return value

    patch.replace(state_module, "parse_choice_from_env", ReadsTheVariable())


@mutant("cpu-flag-starts-num-processes",
        "accelerate launch --cpu --num_processes 2 starts 2 CPU processes (torch elastic's launcher, gloo), "
        "not one plain process")
def cpu_flag_starts_num_processes(patch):
    import os
    import socket

    import accelerate.commands.launch as launch_module

    original = launch_module.simple_launcher

    class SimpleLauncher:  # not a plain function: only taking the multi-process path records a run
        def __call__(self, args):
            if not (args.cpu and args.num_processes > 1):
                return original(args)
            patch.ran()  # in the launcher, a fork of the rank: the patch's flag is in shared memory
            if args.main_process_port is None:
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", 0))
                    args.main_process_port = probe.getsockname()[1]
            os.environ["ACCELERATE_USE_CPU"] = "true"  # the launcher's own environment, passed to its workers
            return launch_module.multi_gpu_launcher(args)

    patch.replace(launch_module, "simple_launcher", SimpleLauncher())


@mutant("local-process-index-is-global-rank",
        "Accelerate takes the local process index (the device index) from the global rank, not LOCAL_RANK")
def local_process_index_is_global_rank(patch):
    import dataclasses

    import accelerate.state as state_module

    mark = _reached_in_forked_children(patch)
    original = state_module.get_cpu_distributed_information

    def get_cpu_distributed_information():
        mark()
        information = original()
        return dataclasses.replace(information, local_rank=information.rank)

    patch.replace(state_module, "get_cpu_distributed_information", get_cpu_distributed_information)


@mutant("torch-distributed-launch-not-deprecated",
        "torch.distributed.launch is a supported entry point: its main carries no deprecation")
def torch_distributed_launch_not_deprecated(patch):
    import torch.distributed.launch as launch

    original = launch.main

    class Undeprecated:  # the same entry point, without the @deprecated marker
        def __call__(self, *args, **kwargs):
            return original(*args, **kwargs)

        def __getattr__(self, name):
            if name == "__deprecated__":
                patch.ran()  # a caller looked for the deprecation and found none
                raise AttributeError(name)
            return getattr(original, name)

    patch.replace(launch, "main", Undeprecated())


@mutant("split-between-processes-missing",
        "the installed accelerate lacks Accelerator.split_between_processes, as 0.17.1 (the handout's pin) does")
def split_between_processes_missing(patch):
    from accelerate import Accelerator

    class Missing:  # looked up on the class or an instance: AttributeError, as in a release without it
        def __get__(self, instance, owner):
            patch.ran()
            raise AttributeError("split_between_processes")

    patch.replace(Accelerator, "split_between_processes", Missing())


@mutant("accelerator-takes-dataloader-switches",
        "Accelerator(...) still takes even_batches, use_seedable_sampler and split_batches directly, as 0.x did")
def accelerator_takes_dataloader_switches(patch):
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration

    def init(original, self, *args, **kwargs):
        switches = {name: kwargs.pop(name) for name in ("even_batches", "use_seedable_sampler", "split_batches")
                    if name in kwargs}
        if switches and kwargs.get("dataloader_config") is None:
            kwargs["dataloader_config"] = DataLoaderConfiguration(**switches)
        return original(self, *args, **kwargs)

    patch.wrap(Accelerator, "__init__", init)


@mutant("torchrun-passes-local-rank",
        "torchrun passes --local-rank=<local rank> to the script, as the deprecated torch.distributed.launch does")
def torchrun_passes_local_rank(patch):
    import torch.distributed.run as run

    # config_from_args appends --local-rank=<rank> to the worker's arguments when get_use_env(args) is
    # False; torchrun's parser has no use_env, so the real function returns True for it.
    patch.replace(run, "get_use_env", lambda args: False)


@mutant("static-rendezvous-does-not-wait-for-machine-0",
        "a machine that reaches the static rendezvous before machine 0's store is up tries to connect once and "
        "gives up instead of waiting for it: machine 0 must be started first")
def static_rendezvous_does_not_wait_for_machine_0(patch):
    import socket

    from torch.distributed.elastic.rendezvous import RendezvousConnectionError
    from torch.distributed.elastic.rendezvous.static_tcp_rendezvous import StaticTCPRendezvous

    def next_rendezvous(original, self):
        if self.rank != 0 and self._store is None:  # one connection attempt, no retry until the timeout
            try:
                socket.create_connection((self.master_addr, self.master_port), timeout=0.1).close()
            except OSError as error:
                raise RendezvousConnectionError(f"machine 0's store at {self.master_addr}:{self.master_port} "
                                                f"is not up: {error}") from error
        return original(self)

    patch.wrap(StaticTCPRendezvous, "next_rendezvous", next_rendezvous)


# --- all-processes-on-gpu-0 (pages-a) ------------------------------------------------------------
def _during_set_device(patch, name, stand_in):
    """PartialState.set_device runs with torch.cuda.<name> replaced by `stand_in` for the call."""
    import torch
    from accelerate import PartialState

    def altered(original, self):
        saved = getattr(torch.cuda, name)
        setattr(torch.cuda, name, stand_in(saved))
        try:
            return original(self)
        finally:
            setattr(torch.cuda, name, saved)

    patch.wrap(PartialState, "set_device", altered)


@mutant("accelerate-never-sets-current-device",
        "Accelerate computes each process's device but never makes it current (no torch.cuda.set_device)")
def accelerate_never_sets_current_device(patch):
    _during_set_device(patch, "set_device", lambda saved: (lambda device: None))


@mutant("accelerate-device-index-ignores-device-count",
        "Accelerate uses LOCAL_RANK as the device index as it is, even past the last GPU")
def accelerate_device_index_ignores_device_count(patch):
    _during_set_device(patch, "device_count", lambda saved: (lambda: 2**31))
