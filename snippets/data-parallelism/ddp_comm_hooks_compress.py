# DDP communication hooks through Accelerate: DistributedDataParallelKwargs(comm_hook=...) registers
# torch's fp16 / bf16 compression hook or PowerSGD on the prepared DDP model. The fp16 hook
# all-reduces the gradient bucket cast to float16 (half the bytes; the averaged gradient carries
# fp16 rounding). The bf16 hook is refused by a torch build without CUDA/NCCL. PowerSGD sends two low-rank factors instead of each large matrix, but only after
# start_powerSGD_iter iterations (1000 by default): before that it is a plain all-reduce.
# What each hook sends is recorded by wrapping torch.distributed.all_reduce (the hooks call it from
# Python) around each backward. Baseline and control: torch's allreduce_hook, the Python form of
# DDP's built-in averaging, registered the same way. The built-in C++ path itself (no hook) does not
# call the Python all_reduce, so it is checked two other ways: its averaged gradient equals the
# baseline's, and its reducer reports a bucket of the same number of bytes (_get_ddp_logging_data).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/data-parallelism/ddp_comm_hooks_compress.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import contextlib

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import DDPCommunicationHookType, DistributedDataParallelKwargs
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

import _claims

STEPS = 4  # backward passes per configuration
POWER_SGD_BYTES_BOUND = 4000  # bytes per step; the full fp32 gradient of this model is 17,680 bytes


@contextlib.contextmanager
def recording_all_reduce(sent):
    """Record (dtype, bytes) of every tensor passed to torch.distributed.all_reduce inside the block."""
    original = dist.all_reduce

    def recording(tensor, *args, **kwargs):
        sent.append((str(tensor.dtype), tensor.numel() * tensor.element_size()))
        return original(tensor, *args, **kwargs)

    dist.all_reduce = recording
    try:
        yield
    finally:
        dist.all_reduce = original


def run(hook, state_options=None, builtin=False):
    """Prepare the same model with `hook`, run STEPS backward passes; return what was sent and the grads.

    hook=None registers torch's allreduce_hook (the recorded baseline); builtin=True registers nothing.
    """
    if hook is None:
        accelerator = Accelerator()
    else:
        handler = DistributedDataParallelKwargs(comm_hook=hook, comm_state_option=state_options or {})
        accelerator = Accelerator(kwargs_handlers=[handler])
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))
    model = accelerator.prepare(model)
    if hook is None and not builtin:  # the baseline: DDP's averaging as a Python hook, so it is recorded too
        model.register_comm_hook(None, default_hooks.allreduce_hook)
    g = torch.Generator().manual_seed(accelerator.process_index)  # each rank its own data
    x, y = torch.randn(16, 64, generator=g), torch.randn(16, 4, generator=g)
    per_step, first_grads, last_grads = [], None, None
    for step in range(STEPS):
        sent = []
        with recording_all_reduce(sent):
            torch.nn.functional.mse_loss(model(x), y).backward()
        per_step.append(sent)
        last_grads = torch.cat([p.grad.flatten() for p in model.parameters()])
        first_grads = last_grads if first_grads is None else first_grads
        model.zero_grad()
    run.bucket_bytes = model._get_ddp_logging_data().get("bucket_sizes")  # the C++ reducer's own bucket sizes
    return per_step, first_grads, last_grads


def relative_error(grads, reference):
    return ((grads - reference).abs().max() / reference.abs().max()).item()


baseline, exact, _ = run(None)
builtin_sent, builtin_grads, _ = run(None, builtin=True)  # DDP's own C++ all-reduce, no hook registered
builtin_bucket_bytes = run.bucket_bytes
fp16, fp16_grads, _ = run(DDPCommunicationHookType.FP16)


def registration_error(hook):
    try:
        run(hook)
    except Exception as error:  # noqa: BLE001 - the error type is the measurement
        return type(error).__name__
    return "none"


bf16_error = registration_error(DDPCommunicationHookType.BF16)
fp16_error = registration_error(DDPCommunicationHookType.FP16)
power_sgd, _, power_sgd_grads = run(DDPCommunicationHookType.POWER_SGD, {"start_powerSGD_iter": 2})
power_sgd_default, _, _ = run(DDPCommunicationHookType.POWER_SGD)  # accelerate's default: comm_state_option={}


def dtypes(per_step):
    return sorted({dtype for step in per_step for dtype, _ in step})


def bytes_at_last_step(per_step):
    return sum(size for _, size in per_step[-1])


_claims.equal(
    "fp16_hook_sends_float16",
    measured=dtypes(fp16),
    control=dtypes(baseline),
    expected=["torch.float16"],
    bytes_per_step_fp16=bytes_at_last_step(fp16),
    bytes_per_step_baseline=bytes_at_last_step(baseline),
    builtin_reducer_bucket_bytes=builtin_bucket_bytes,
    builtin_python_all_reduces=sum(len(step) for step in builtin_sent),
)
_claims.between(
    "fp16_hook_error_is_rounding",
    measured=relative_error(fp16_grads, exact),
    control=relative_error(builtin_grads, exact),  # DDP's built-in path against the baseline hook
    low=1e-6,
    high=1e-3,
)
_claims.equal(
    "bf16_hook_refused_without_cuda",
    measured=bf16_error,
    control=fp16_error,
    expected="TypeError",
    torch_cuda=str(torch.version.cuda),
)
_claims.at_most(
    "power_sgd_sends_low_rank_factors",
    measured=bytes_at_last_step(power_sgd),
    control=bytes_at_last_step(baseline),
    tolerance=POWER_SGD_BYTES_BOUND,
    all_reduces_per_step=len(power_sgd[-1]),
    bytes_per_step_first_iteration=bytes_at_last_step(power_sgd[:1]),
    matrix_approximation_rank=1,
    start_powerSGD_iter=2,
    relative_error_last_step=relative_error(power_sgd_grads, exact),
)
_claims.at_least(
    "power_sgd_default_waits_1000_iterations",
    measured=bytes_at_last_step(power_sgd_default),
    control=bytes_at_last_step(power_sgd),
    bound=POWER_SGD_BYTES_BOUND,
    steps=STEPS,
)
