"""Mutants for failures: the library bugs that the wrong answers on these pages describe.

Each is a quiet, plausible misbehaviour of accelerate or torch (wrong numbers, a skipped check), applied in
every rank for one run of a snippet; the forked children of the hang proofs inherit the patch.
"""
from verify.mutation import mutant


def _reached_in_forked_children(patch):
    """The hang proofs run their collectives in forked children, whose memory the rank never sees: a
    shared flag set by the mutated code in a child is read back each time the rank joins a child."""
    import multiprocessing
    import multiprocessing.process

    flag = multiprocessing.get_context("fork").RawValue("i", 0)
    original_join = multiprocessing.process.BaseProcess.join

    class Join:  # not a plain function: calling it records nothing by itself
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


class _Callable:
    """A callable that is not a plain function, so that only `mark()` records that it ran."""

    def __init__(self, function):
        self.function = function

    def __call__(self, *args, **kwargs):
        return self.function(*args, **kwargs)


@mutant("prepare-skips-ddp-for-frozen-model",
        "accelerator.prepare on CPU leaves a model with no trainable parameter unwrapped, as the GPU branch does")
def prepare_skips_ddp_for_frozen_model(patch):
    from accelerate import Accelerator

    def prepare_model(original, self, model, *args, **kwargs):
        if not any(p.requires_grad for p in model.parameters()):
            patch.ran()
            return model
        return original(self, model, *args, **kwargs)

    patch.wrap(Accelerator, "prepare_model", prepare_model)


@mutant("ddp-skips-model-check",
        "DDP does not compare the models of the ranks when it wraps them (no parameter count or shape check)")
def ddp_skips_model_check(patch):
    import torch.nn.parallel.distributed as ddp_module

    patch.replace(ddp_module, "_verify_param_shape_across_processes", lambda process_group, tensors, logger=None: None)


@mutant("accelerator-state-accepts-new-settings",
        "a second Accelerator with another mixed_precision is accepted silently (AcceleratorState does not check)")
def accelerator_state_accepts_new_settings(patch):
    from accelerate.state import AcceleratorState

    patch.replace(AcceleratorState, "_check_initialized", lambda self, mixed_precision=None, cpu=None: None)


@mutant("gather-returns-ragged",
        "gather of different shapes just concatenates what each rank has (a ragged result, no error)")
def gather_returns_ragged(patch):
    import torch
    import torch.distributed as dist
    import accelerate.accelerator as accelerator_module

    def gather(tensor):
        patch.ran()
        pieces = [None] * dist.get_world_size()
        dist.all_gather_object(pieces, tensor)
        pieces = [piece.to(tensor.device) for piece in pieces]
        if len({piece.shape[1:] for piece in pieces}) > 1:  # rows of different lengths: one flat run of values
            pieces = [piece.reshape(-1) for piece in pieces]
        return torch.cat(pieces)

    patch.replace(accelerator_module, "gather", gather)


@mutant("check-trigger-drops-the-flag",
        "check_trigger resets the flag before it reduces it, so a set_trigger on one rank is never seen")
def check_trigger_drops_the_flag(patch):
    from accelerate import Accelerator

    def check_trigger(original, self):
        self.flag_tensor = None  # the reset happens first: every rank reduces a 0
        return original(self)

    patch.wrap(Accelerator, "check_trigger", check_trigger)


@mutant("accelerator-reduce-defaults-to-mean",
        "Accelerator.reduce averages unless told otherwise (reduction defaults to 'mean', not 'sum'), so "
        "check_trigger sees 1/world of one rank's flag")
def accelerator_reduce_defaults_to_mean(patch):
    from accelerate import Accelerator

    def reduce(original, self, tensor, reduction=None, scale=1.0):
        if reduction is not None:
            return original(self, tensor, reduction, scale)
        # the mean of the sum, out of place: accelerate's own "mean" divides in place and refuses the int flag
        return original(self, tensor, "sum", scale) / self.num_processes

    patch.wrap(Accelerator, "reduce", reduce)


@mutant("all-reduce-max-takes-min",
        "all_reduce with ReduceOp.MAX returns the minimum (the flag of a rank that did not want to stop wins)")
def all_reduce_max_takes_min(patch):
    import torch.distributed as dist

    def all_reduce(original, tensor, op=dist.ReduceOp.SUM, *args, **kwargs):
        if op == dist.ReduceOp.MAX:
            patch.ran()
            op = dist.ReduceOp.MIN
        return original(tensor, op, *args, **kwargs)

    patch.wrap(dist, "all_reduce", all_reduce)


@mutant("barrier-does-not-wait",
        "barrier returns at once instead of waiting for every rank of the group")
def barrier_does_not_wait(patch):
    import torch.distributed as dist

    patch.replace(dist, "barrier", lambda *args, **kwargs: None)


@mutant("pg-timeout-ignored",
        "init_process_group ignores its timeout argument and keeps the 30-minute default")
def pg_timeout_ignored(patch):
    import torch.distributed as dist

    mark = _reached_in_forked_children(patch)
    original = dist.init_process_group

    def init_process_group(*args, **kwargs):
        if kwargs.pop("timeout", None) is not None:
            mark()
        return original(*args, **kwargs)

    init_process_group.__wrapped__ = original
    patch.replace(dist, "init_process_group", _Callable(init_process_group))


@mutant("detail-skips-collective-checks",
        "TORCH_DISTRIBUTED_DEBUG=DETAIL does not wrap the process group, so no collective is checked")
def detail_skips_collective_checks(patch):
    import torch.distributed.distributed_c10d as c10d

    mark = _reached_in_forked_children(patch)

    def unwrapped(wrapped_pg, *args, **kwargs):
        mark()
        return wrapped_pg

    patch.replace(c10d, "_create_process_group_wrapper", _Callable(unwrapped))


@mutant("all-reduce-fails-cleanly-on-shape-mismatch",
        "all_reduce compares the shapes of the ranks first and raises a Python error when they differ")
def all_reduce_fails_cleanly_on_shape_mismatch(patch):
    import torch
    import torch.distributed as dist

    mark = _reached_in_forked_children(patch)
    original = dist.all_reduce

    def all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        mark()
        sizes = [torch.zeros(1, dtype=torch.long) for _ in range(dist.get_world_size(group))]
        dist.all_gather(sizes, torch.tensor([tensor.numel()]), group=group)
        if len({int(size) for size in sizes}) > 1:
            raise RuntimeError(f"all_reduce: tensor sizes differ across ranks: {[int(size) for size in sizes]}")
        return original(tensor, op, group=group, async_op=async_op)

    patch.replace(dist, "all_reduce", _Callable(all_reduce))


@mutant("max-restarts-ignored",
        "torchrun ignores --max-restarts: the elastic agent never restarts a failed worker group")
def max_restarts_ignored(patch):
    import torch.distributed.run as run_module

    def config_from_args(original, args):
        config, command, command_args = original(args)
        config.max_restarts = 0  # in the launcher, a fork of the rank: the patch's flag is in shared memory
        return config, command, command_args

    patch.wrap(run_module, "config_from_args", config_from_args)


@mutant("torchrun-restarts-by-default",
        "torchrun restarts a failed worker group unless told not to (--max-restarts defaults to 3, not 0)")
def torchrun_restarts_by_default(patch):
    import torch.distributed.run as run_module

    def get_args_parser(original):
        parser = original()
        parser.set_defaults(max_restarts=3)  # only a command line without --max-restarts sees it
        return parser

    patch.wrap(run_module, "get_args_parser", get_args_parser)


@mutant("agent-leaves-healthy-workers-running",
        "when one worker fails, torchrun's agent sends the other workers no signal and waits for them to end "
        "by themselves")
def agent_leaves_healthy_workers_running(patch):
    import subprocess

    from torch.distributed.elastic.multiprocessing.api import SubprocessContext

    def close(original, self, death_sig, timeout=30):
        for handler in self.subprocess_handlers.values():
            try:
                handler.proc.wait(timeout)  # no signal: a healthy worker runs on until it ends
            except subprocess.TimeoutExpired:
                pass
        return original(self, death_sig, timeout)

    patch.wrap(SubprocessContext, "_close", close)


@mutant("agent-ignores-worker-exit-code",
        "torchrun's agent counts a worker that exited with an error as finished: no failure, no restart, "
        "and the job ends normally once the last worker has ended")
def agent_ignores_worker_exit_code(patch):
    from torch.distributed.elastic.multiprocessing.api import SubprocessContext

    def capture(original, self, done_local_ranks):
        original(self, done_local_ranks)
        self._failures.clear()  # a non-zero exit code is forgotten as soon as it is seen

    patch.wrap(SubprocessContext, "_capture_process_failures", capture)


@mutant("save-state-only-on-main-process",
        "accelerator.save_state writes only on the main process: the other ranks save nothing, their random "
        "states included")
def save_state_only_on_main_process(patch):
    import accelerate.accelerator as accelerator_module
    from accelerate.state import PartialState

    def save_accelerator_state(original, output_dir, *args, **kwargs):
        if not PartialState().is_main_process:
            return output_dir  # a non-main rank returns as if it had saved
        return original(output_dir, *args, **kwargs)

    patch.wrap(accelerator_module, "save_accelerator_state", save_accelerator_state)


@mutant("blocking-collectives-wait-in-python",
        "a blocking all_reduce or barrier waits for its work in Python, so Ctrl-C interrupts it at once")
def blocking_collectives_wait_in_python(patch):
    import time

    import torch.distributed as dist

    mark = _reached_in_forked_children(patch)

    def waiting_in_python(original):
        def collective(*args, async_op=False, **kwargs):
            if async_op:
                return original(*args, async_op=True, **kwargs)
            mark()
            work = original(*args, async_op=True, **kwargs)
            while not work.is_completed():
                time.sleep(0.01)
            work.wait()  # a collective that completed with an error raises it, as the blocking call would
        return _Callable(collective)

    patch.replace(dist, "all_reduce", waiting_in_python(dist.all_reduce))
    patch.replace(dist, "barrier", waiting_in_python(dist.barrier))


# ---- failures/checkpoint-interval-planning (pages-b)
@mutant("save-state-skips-optimizer",
        "accelerator.save_state writes the model weights (and random states) but not the optimizer's state")
def save_state_skips_optimizer(patch):
    import accelerate.accelerator as accelerator_module

    def without_optimizers(original, output_dir, model_states, optimizers, *args, **kwargs):
        return original(output_dir, model_states, [], *args, **kwargs)

    patch.wrap(accelerator_module, "save_accelerator_state", without_optimizers)


# --- the NCCL watchdog and flight recorder page (failures/nccl-watchdog-and-flight-recorder) ----------------
@mutant(
    "flight-recorder-off-by-default",
    "the flight recorder records nothing unless TORCH_NCCL_TRACE_BUFFER_SIZE is set (a default buffer of 0)",
)
def flight_recorder_off_by_default(patch):
    import pickle

    from torch._C import _distributed_c10d

    def empty_buffer(original, *args, **kwargs):
        trace = pickle.loads(original(*args, **kwargs))
        trace["entries"] = []  # what a ring buffer of size 0 holds
        return pickle.dumps(trace)

    patch.wrap(_distributed_c10d, "_dump_fr_trace", empty_buffer)


# --- failures/nccl-debugging-variables (pages-d) ----------------
@mutant("debug-detail-wraps-nothing",
        "TORCH_DISTRIBUTED_DEBUG=DETAIL only adds logging: a group made at DETAIL gets no collective-checking wrapper")
def debug_detail_wraps_nothing(patch):
    from torch.distributed import distributed_c10d

    patch.wrap(distributed_c10d, "_create_process_group_wrapper",
               lambda original, wrapped_pg, *args, **kwargs: wrapped_pg)


@mutant("distributed-sampler-shuffle-depends-on-world-size",
        "DistributedSampler's shuffle is seeded by the world size too, so a resized job draws another permutation")
def distributed_sampler_shuffle_depends_on_world_size(patch):
    from torch.utils.data import DistributedSampler

    def reseeded(original, self):
        seed = self.seed
        self.seed = seed + 1000 * self.num_replicas
        try:
            return original(self)
        finally:
            self.seed = seed

    patch.wrap(DistributedSampler, "__iter__", reseeded)
