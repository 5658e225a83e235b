# torch.compile through the Accelerator's own arguments, on 2 ranks (MULTI_CPU, DDP, backend "eager"):
#   1. Accelerator(dynamo_backend="eager") as the process's Accelerator: prepare() returns an OptimizedModule
#      around the DDP model, and one forward and backward of a user-defined module compile a graph.
#      Negative control: the same program with Accelerator() (no backend): plain DDP, no graph.
#   2. The state is a singleton: a second Accelerator(dynamo_backend="eager") in a process whose first
#      Accelerator had no backend keeps the first one's plugin, and prepare() compiles nothing.
#      Negative control: the same second Accelerator after AcceleratorState is reset.
#   3. prepare() compiles the DDP wrapper: dynamo graph-breaks inside DDP.forward and compiles the wrapped
#      module's forward as a frame of its own, which dynamo skips when that module is a torch.nn container:
#      a bare nn.Sequential comes back as an OptimizedModule that compiled no graph.
#      Negative control: the same layers inside a user-defined module (its forward is user code).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/performance/compile_through_accelerator_arguments.py
import torch
import torch._dynamo
from accelerate import Accelerator
from accelerate.state import AcceleratorState
from torch._dynamo.backends.distributed import DDPOptimizer
from torch._dynamo.eval_frame import OptimizedModule
from torch._dynamo.utils import counters

import _claims

ddp_optimizer_calls = []
original_compile_fn = DDPOptimizer.compile_fn


def counting_compile_fn(self, graph_module, example_inputs):  # a counter around dynamo's own splitter
    ddp_optimizer_calls.append(1)
    return original_compile_fn(self, graph_module, example_inputs)


DDPOptimizer.compile_fn = counting_compile_fn


def layers():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


class Net(torch.nn.Module):  # the same layers behind a forward written by the user
    def __init__(self):
        super().__init__()
        self.layers = layers()

    def forward(self, x):
        return self.layers(x)


def step(accelerator, model):
    """Prepare, one forward and backward; what dynamo compiled."""
    torch._dynamo.reset()
    counters.clear()
    ddp_optimizer_calls.clear()
    prepared = accelerator.prepare(model)
    prepared(torch.randn(4, 16)).sum().backward()
    return {
        "optimized_module": int(isinstance(prepared, OptimizedModule)),
        "compiled_wraps": type(getattr(prepared, "_orig_mod", prepared)).__name__,
        "graphs": counters["stats"]["unique_graphs"],
        "graph_breaks": sum(counters["graph_break"].values()),
        "ddp_optimizer_calls": len(ddp_optimizer_calls),
    }


try:
    plain = step(Accelerator(), Net())  # the process's first Accelerator, no backend
    second = step(Accelerator(dynamo_backend="eager"), Net())  # a second one: the state keeps "no"
    AcceleratorState._reset_state()  # what a new process would start from (the process group stays)
    compiling = Accelerator(dynamo_backend="eager")
    compiled = step(compiling, Net())
    sequential = step(compiling, layers())
finally:
    DDPOptimizer.compile_fn = original_compile_fn  # the counter is this proof's alone

_claims.at_least(
    "accelerator_dynamo_backend_compiles",
    measured=compiled["graphs"],
    control=plain["graphs"],  # Accelerator() without a backend: prepare compiles nothing
    bound=1,
    prepared_is_optimized_module=compiled["optimized_module"],
    compiled_wraps=compiled["compiled_wraps"],
    graph_breaks=compiled["graph_breaks"],
    ddp_optimizer_calls=compiled["ddp_optimizer_calls"],
)
_claims.equal(
    "second_accelerator_keeps_the_first_backend",
    measured=second["optimized_module"],  # 0: the dynamo_backend of a second Accelerator is not used
    control=compiled["optimized_module"],  # the same Accelerator(dynamo_backend="eager") after a reset: 1
    expected=0,
    second_compiled_wraps=second["compiled_wraps"],
)
_claims.equal(
    "bare_sequential_compiles_no_graph",
    measured=[sequential["optimized_module"], sequential["graphs"]],  # an OptimizedModule, 0 graphs
    control=[compiled["optimized_module"], compiled["graphs"]],  # the same layers inside Net: 1 graph
    expected=[1, 0],
    sequential_ddp_optimizer_calls=sequential["ddp_optimizer_calls"],
)
