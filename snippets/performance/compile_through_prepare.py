# What Accelerate does with torch.compile. With a dynamo backend set (Accelerator(dynamo_backend=...) or
# a TorchDynamoPlugin), prepare() wraps the model, after DDP, in torch.compile: the prepared model is an
# OptimizedModule and its first forward is traced by dynamo. Negative control: the same prepare without
# a backend, which compiles nothing. With use_regional_compilation=True, prepare compiles each repeated
# block (a ModuleList of one class) on its own and dynamo reuses the block's compiled code for every
# copy, so dynamo traces one block, not all of them. Negative control: the same model compiled whole
# (use_regional_compilation=False), where dynamo traces every block's operations.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/performance/compile_through_prepare.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
#
# The backend is "eager": dynamo captures the graphs but runs them with the ordinary kernels, so this
# needs no C++ compiler and measures what Accelerate and dynamo decide, not speed ("inductor", the
# default of torch.compile, generates kernels; its speed-up is a GPU question, see the page).
import time

import torch
import torch._dynamo
from accelerate import Accelerator
from accelerate.utils import TorchDynamoPlugin, set_seed
from torch._dynamo.utils import counters

import _claims

WIDTH = 16


class Block(torch.nn.Module):  # the repeated block, like GPT2Block in a transformer
    def __init__(self):
        super().__init__()
        self.norm, self.fc = torch.nn.LayerNorm(WIDTH), torch.nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        return x + torch.relu(self.fc(self.norm(x)))


class Net(torch.nn.Module):
    def __init__(self, depth):
        super().__init__()
        self.embed = torch.nn.Linear(WIDTH, WIDTH)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(depth))
        self.head = torch.nn.Linear(WIDTH, 1)

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


accelerator = Accelerator()  # the process group; each case below prepares with its own plugin
x = torch.randn(8, WIDTH)


def prepare_and_step(depth, plugin):
    """Prepare Net(depth) with this dynamo plugin and run one forward; what dynamo traced."""
    torch._dynamo.reset()
    counters.clear()
    accelerator.state.dynamo_plugin = plugin  # what Accelerator(dynamo_plugin=plugin) stores
    set_seed(0)
    model = accelerator.prepare(Net(depth))
    started = time.perf_counter()
    model(x)  # dynamo traces and compiles on the first call; the backward would add no graph here
    return {
        "optimized_module": int(isinstance(model, torch._dynamo.eval_frame.OptimizedModule)),
        "compiled_wraps": type(getattr(model, "_orig_mod", model)).__name__,
        "compiled_blocks": sum(isinstance(m, torch._dynamo.eval_frame.OptimizedModule) for m in model.modules()),
        "frames_compiled": counters["frames"]["ok"],
        "graphs": counters["stats"]["unique_graphs"],
        "ops_traced": counters["stats"]["calls_captured"],  # calls dynamo put into graphs
        "seconds": time.perf_counter() - started,
    }


OPS_PER_BLOCK = 4  # layer_norm, linear, relu, add: what dynamo captures for one Block
DEPTH = 4
whole_plugin = TorchDynamoPlugin(backend="eager")
# `accelerate launch` exports ACCELERATE_DYNAMO_USE_DYNAMIC=False unless --dynamo_use_dynamic, and the plugin
# reads it (TorchDynamoPlugin.__post_init__), so prepare() calls torch.compile(..., dynamic=False).
compile_kwargs = whole_plugin.to_kwargs()
whole = prepare_and_step(DEPTH, whole_plugin)
plain = prepare_and_step(DEPTH, TorchDynamoPlugin(backend="no"))  # control: no backend, prepare compiles nothing
regional = prepare_and_step(DEPTH, TorchDynamoPlugin(backend="eager", use_regional_compilation=True))
DEEPER = 12  # more blocks than dynamo's recompile limit (8): a per-block recompile would show here
regional_deeper = prepare_and_step(DEEPER, TorchDynamoPlugin(backend="eager", use_regional_compilation=True))
whole_deeper = prepare_and_step(DEEPER, TorchDynamoPlugin(backend="eager"))

_claims.at_least(
    "prepare_compiles_the_model",
    measured=whole["graphs"],
    control=plain["graphs"],
    bound=1,
    prepared_is_optimized_module=whole["optimized_module"],
    compiled_wraps=whole["compiled_wraps"],
    control_is_optimized_module=plain["optimized_module"],
    ops_traced=whole["ops_traced"],
    first_step_seconds=whole["seconds"],
    control_first_step_seconds=plain["seconds"],
    torch_compile_kwargs={key: str(value) for key, value in compile_kwargs.items()},  # what prepare passes on
)

# Regional compilation traces one Block (plus the embedding and the head), not DEPTH of them: each
# block is its own compiled module, and all DEPTH of them run the one compiled graph of Block.forward.
# At least one block's operations (so something was traced), at most one block's plus the two Linears.
_claims.between(
    "regional_compilation_traces_one_block",
    measured=regional["ops_traced"],
    control=whole["ops_traced"],
    low=OPS_PER_BLOCK,
    high=OPS_PER_BLOCK + 2,
    depth=DEPTH,
    compiled_modules=regional["compiled_blocks"],
    graphs=regional["graphs"],
    graphs_whole=whole["graphs"],
    first_step_seconds=regional["seconds"],
    first_step_seconds_whole=whole["seconds"],
    deeper_depth=DEEPER,
    ops_traced_regional_deeper=regional_deeper["ops_traced"],
    graphs_regional_deeper=regional_deeper["graphs"],
    ops_traced_whole_deeper=whole_deeper["ops_traced"],
)
