# Parameters that get no gradient under DDP: a model with a layer that forward never uses.
# By default DDP waits for a gradient of every parameter before its bucket is all-reduced. The first
# backward ends without complaint but the bucket was never reduced, so the gradients of the layer that
# WAS used stay un-averaged (ranks disagree); the next forward raises "Expected to have finished
# reduction in the prior iteration ...". find_unused_parameters=True or static_graph=True fix it;
# with TORCH_DISTRIBUTED_DEBUG=INFO the message names the parameters.
# find_unused_parameters=True also covers a returned output that the loss ignores: DDP routes the outputs
# through its _DDPSink autograd Function, whose backward hands the reducer an undefined gradient for it.
# Negative controls: the same model with find_unused_parameters=True (no error, gradients averaged);
# the default DDP (static_graph=False); the debug level OFF (the error gives indices only).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/data-parallelism/ddp_unused_parameter_error.py
import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import DistributedDataParallelKwargs

import _claims


class TwoHeads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.used = torch.nn.Linear(4, 4)
        self.unused = torch.nn.Linear(4, 4)  # e.g. a head that only some tasks use

    def forward(self, x):
        return self.used(x)


class IgnoredOutput(TwoHeads):
    """Both layers run in forward and both outputs are returned, but the loss uses only the first."""

    def forward(self, x):
        return self.used(x), self.unused(x)


def train(iterations=3, model_class=TwoHeads, **ddp_options):
    """Returns (iterations completed, error message or "", cross-rank gap of used.weight.grad after step 1)."""
    accelerator = Accelerator(kwargs_handlers=[DistributedDataParallelKwargs(**ddp_options)])
    torch.manual_seed(0)
    model = accelerator.prepare(model_class())
    torch.manual_seed(1 + accelerator.process_index)  # each rank its own data, so local gradients differ
    gap = None
    for step in range(iterations):
        try:
            model.zero_grad()
            output = model(torch.randn(8, 4))
            output = output[0] if isinstance(output, tuple) else output  # the loss ignores output[1]
            output.pow(2).mean().backward()
        except RuntimeError as error:
            return step, str(error), gap
        if step == 0:  # averaged gradients are identical on both ranks; local ones are not
            grads = [torch.zeros_like(model.module.used.weight.grad) for _ in range(accelerator.num_processes)]
            dist.all_gather(grads, model.module.used.weight.grad)
            gap = (grads[0] - grads[1]).abs().max().item()
    return iterations, "", gap


default_steps, default_error, default_gap = train()
found_steps, found_error, found_gap = train(find_unused_parameters=True)
static_steps, static_error, static_gap = train(static_graph=True)
ignored_found_steps, ignored_found_error, _ = train(model_class=IgnoredOutput, find_unused_parameters=True)
ignored_default_steps, ignored_default_error, _ = train(model_class=IgnoredOutput)

previous_level = dist.get_debug_level()
dist.set_debug_level(dist.DebugLevel.INFO)  # what TORCH_DISTRIBUTED_DEBUG=INFO sets at import
try:
    _, named_error, _ = train()
finally:
    dist.set_debug_level(previous_level)

EXPECTED_ERROR = "Expected to have finished reduction in the prior iteration before starting a new one"
_claims.equal(
    "error_on_second_forward",
    # iterations completed before the error, counted only when the error is the reducer's (None otherwise)
    measured=default_steps if default_error.startswith(EXPECTED_ERROR) else None,
    control=found_steps,
    expected=1,
    error=default_error[:400],
    error_starts_with_expected_text=default_error.startswith(EXPECTED_ERROR),
    find_unused_error=found_error,
)
_claims.at_least(
    "first_step_gradients_not_averaged",
    measured=default_gap,  # rank 0 vs rank 1 gradient of the USED layer after the first backward
    control=found_gap,
    bound=1e-3,
)
_claims.equal(
    "static_graph_trains_with_unused_layer",
    measured=static_steps,
    control=default_steps,
    expected=3,
    static_graph_gap_after_step_1=static_gap,
    static_graph_error=static_error,
)
_claims.equal(
    "find_unused_covers_an_ignored_output",
    measured=ignored_found_steps,  # a returned output the loss never uses, find_unused_parameters=True
    control=ignored_default_steps,
    expected=3,
    find_unused_error=ignored_found_error,
    default_error=ignored_default_error[:200],
)
_claims.equal(
    "debug_level_names_the_parameter",
    measured=int("unused.weight" in named_error),
    control=int("unused.weight" in default_error),
    expected=1,
    error_with_debug_info=named_error[-300:],
    error_without=default_error[-300:],
)
