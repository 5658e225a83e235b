# Two docstrings that say what the code does not do, on 2 ranks.
#
# 1. Accelerator.optimizer_step_was_skipped (accelerate/accelerator.py, 1.15.0): "Whether or not the optimizer
#    update was skipped (because of gradient overflow in mixed precision), in which case the learning rate should
#    not be changed." Accelerate decides "skipped" by whether GradScaler.step called optimizer.step()
#    (AcceleratedOptimizer.step, accelerate/optimizer.py). For a fused optimizer (_step_supports_amp_scaling)
#    GradScaler.step always calls optimizer.step() and the fused kernel itself skips the update on inf/NaN
#    (torch/amp/grad_scaler.py). So on an overflow step the weights stay put, yet optimizer_step_was_skipped
#    is False, and the prepared scheduler steps.
# 2. torch's allreduce_hook (torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py): "Once gradient
#    tensors are aggregated across all workers, its then callback takes the mean". The code divides by the
#    world size BEFORE the all-reduce (_allreduce_fut: "Apply the division first to avoid overflow"), and the
#    callback only returns the result. With fp16 gradients of 40000 on 2 ranks that order is what keeps the
#    mean finite: the order the docstring describes (sum, then divide) overflows to inf (fp16 max 65504).
#
# As on the page about skipped steps: on a CPU Accelerator(mixed_precision="fp16") builds no scaler, so two lines
# stand in for the GPU branch of Accelerator.__init__ (native_amp = True and a GradScaler, here GradScaler("cpu")).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/official-docs/docstrings_vs_code.py
import copy

import torch
import torch.distributed as dist
from accelerate import Accelerator
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

import _claims

accelerator = Accelerator(mixed_precision="fp16")
accelerator.native_amp = True  # --- stand-in for the GPU branch of Accelerator.__init__ ...
accelerator.scaler = torch.amp.GradScaler("cpu")  # --- ... which builds GradScaler("cuda") there
rank = accelerator.process_index

torch.manual_seed(0)
base = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
overflow = torch.randn(4, 8)
if rank == 1:
    overflow[0, 0] = 70000.0  # inf once autocast casts it to float16: an overflow on one rank


def overflow_step(fused):
    """One prepared step on an overflowing batch; what Accelerate reports and what really happened."""
    model = copy.deepcopy(base)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, fused=fused)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    before = [p.detach().clone() for p in model.parameters()]
    scale_before = accelerator.scaler.get_scale()
    accelerator.backward(model(overflow).float().square().mean())
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    changed = sum(int((p.detach() != b).sum()) for p, b in zip(model.parameters(), before))
    skipped = accelerator.optimizer_step_was_skipped
    result = dict(
        skipped=skipped,
        weights_changed=changed,
        lr=scheduler.get_last_lr()[0],
        scale=(scale_before, accelerator.scaler.get_scale()),
    )
    accelerator.scaler = torch.amp.GradScaler("cpu")  # a fresh scaler (scale 65536) for the next run
    accelerator._optimizers.clear()
    accelerator._schedulers.clear()
    accelerator._models.clear()
    return result


fused = overflow_step(fused=True)
plain = overflow_step(fused=False)  # control: the same step with the default (for-each) SGD

_claims.equal(
    "fused_overflow_not_flagged_as_skipped",
    measured=fused["skipped"],
    control=plain["skipped"],  # control: non-fused SGD, whose step GradScaler does not call on inf
    expected=False,
    weights_changed_fused=fused["weights_changed"],
    weights_changed_plain=plain["weights_changed"],
    lr_after_fused=fused["lr"],
    lr_after_plain=plain["lr"],
    scale_fused=fused["scale"],
    scale_plain=plain["scale"],
)


# --- 2. allreduce_hook: divide first, then all-reduce -------------------------------------------------------
def sum_then_mean_hook(process_group, bucket):
    """The order allreduce_hook's docstring describes: aggregate, then the callback takes the mean."""
    world = dist.get_world_size()
    return dist.all_reduce(bucket.buffer(), async_op=True).get_future().then(lambda f: f.value()[0].div_(world))


def fp16_ddp_gradient(hook):
    layer = torch.nn.Linear(1, 1, bias=False).half()
    with torch.no_grad():
        layer.weight.fill_(1.0)
    model = torch.nn.parallel.DistributedDataParallel(layer)
    model.register_comm_hook(None, hook)
    (model(torch.ones(1, 1, dtype=torch.float16)) * 40000.0).sum().backward()  # local gradient 40000 on each rank
    return float(layer.weight.grad.item())


torch_order = fp16_ddp_gradient(default_hooks.allreduce_hook)
docstring_order = fp16_ddp_gradient(sum_then_mean_hook)
_claims.equal(
    "allreduce_hook_divides_before_the_allreduce",
    measured=int(torch.isfinite(torch.tensor(torch_order)).item()),
    control=int(torch.isfinite(torch.tensor(docstring_order)).item()),  # control: sum first, mean in the callback
    expected=1,
    gradient_allreduce_hook=torch_order,
    gradient_sum_then_mean=docstring_order,
    local_gradient=40000.0,
    docstring=default_hooks.allreduce_hook.__doc__.split("\n\n")[1].strip(),
)
