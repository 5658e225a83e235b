# Documented calls whose keyword arguments the installed Accelerate (1.15.0) does not accept, run on 2 ranks.
# Each documented statement (from _doc_excerpts.py, copied byte for byte from the docs' sources) is run as written,
# then with the keyword the library does accept; what each raised is reported.
#
# 1. usage_guides/low_precision_training.md: Accelerator(..., kwarg_handlers=kwargs), 4 times (the parameter is
#    kwargs_handlers); FP8RecipeKwargs(..., optimization_level="O2") (opt_level);
#    FullyShardedDataParallelPlugin(..., fsdp_auto_wrap_policy=...) (auto_wrap_policy).
# 2. basic_tutorials/execution.md: @accelerator.on_local_process(local_process_idx=0) (local_process_index).
# 3. concept_guides/training_tpu.md: Accelerator(mixed_precision="bf16", downcast_bf16=True): Accelerator has no
#    such parameter; on TPU, AcceleratorState reads the environment variable ACCELERATE_DOWNCAST_BF16 instead
#    (accelerate/state.py). `accelerate launch --downcast_bf16` sets XLA_DOWNCAST_BF16, not that variable.
# 4. Two docstrings of the installed Accelerator (read with inspect, so the text is the release's): join_uneven_inputs
#    builds Accelerator(even_batches=True) (now DataLoaderConfiguration(even_batches=...)), and profile builds
#    Accelerator(kwarg_handler=[kwargs]) twice (kwargs_handlers).
#
# The fp8 calls need TransformerEngine, MS-AMP or torchao, which this machine lacks: past the keyword, the corrected
# calls stop at that (recorded); the keyword error comes first, when Python binds the arguments.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/official-docs/docs_calls_vs_signatures.py
import ast
import inspect
import os
import warnings

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState, GradientState
from accelerate.utils import (
    DataLoaderConfiguration,
    FP8RecipeKwargs,
    FullyShardedDataParallelPlugin,
    MSAMPRecipeKwargs,
    ProfileKwargs,
)

import _claims
from _doc_excerpts import EXCERPTS


def block(key):
    """(code of the excerpt's fenced block, line of the documentation its first line is on)."""
    lines = EXCERPTS[key]["text"].split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("```")) + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
    return "\n".join(lines[start:end]), EXCERPTS[key]["main"][0] + start


def _parses(line):
    try:
        ast.parse(line)
    except SyntaxError:
        return False
    return True


def statements(key, callee):
    """Each top-level statement of the block that calls `callee`: (its source, its first documentation line)."""
    source, first = block(key)
    try:
        nodes = ast.parse(source).body
    except SyntaxError:  # a placeholder such as `f(backend="te", ...)` is not Python: take the lines one by one
        source = "\n".join(line if _parses(line) else "" for line in source.split("\n"))
        nodes = ast.parse(source).body
    found = []
    for node in nodes:
        calls = [n for n in ast.walk(node) if isinstance(n, ast.Call)]
        names = {getattr(c.func, "id", getattr(c.func, "attr", None)) for c in calls}
        if callee in names:
            found.append((ast.get_source_segment(source, node), first + node.lineno - 1))
    return found


def fresh_state():
    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()


def outcome(source, namespace):
    """What running source raised: 'TypeError: ...' for a rejected keyword, or another class name, or 'none'."""
    fresh_state()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # FP8RecipeKwargs is deprecated (its own warning)
            exec(compile(source, "<doc>", "exec"), namespace)
    except TypeError as error:
        return f"TypeError: {error}"
    except Exception as error:  # past the keyword: a missing fp8 backend on this machine, say
        return type(error).__name__
    finally:
        fresh_state()
    return "none"


def rejects(result, *keywords):
    """1 if the call was refused for one of the keywords (the documented spelling or the accepted one), else 0.
    Measured and control count both spellings, so a library that also refused the corrected keyword fails the claim."""
    return int(result.startswith("TypeError") and any(f"'{keyword}'" in result for keyword in keywords))


rank = Accelerator().process_index

# --- 1. low_precision_training.md --------------------------------------------------------------------------------
names = {"Accelerator": Accelerator, "kwargs": [], "fsdp2_plugin": None, "dynamo_plugin": None}
calls = [s for key in ("lp_te", "lp_msamp", "lp_te_backend", "lp_ao") for s in statements(key, "Accelerator")]
documented = {line: outcome(source, dict(names)) for source, line in calls}
corrected = {
    line: outcome(source.replace("kwarg_handlers=", "kwargs_handlers="), dict(names)) for source, line in calls
}
_claims.equal(
    "kwarg_handlers_is_not_an_accelerator_argument",
    measured=sum(rejects(result, "kwarg_handlers", "kwargs_handlers") for result in documented.values()),
    # control: kwargs_handlers=
    control=sum(rejects(result, "kwarg_handlers", "kwargs_handlers") for result in corrected.values()),
    expected=len(calls),
    documented_calls_at_lines=sorted(documented),
    documented=documented,
    corrected=corrected,  # fp8 needs TransformerEngine or MS-AMP, absent here: a ValueError after the keyword
)

(recipe, recipe_line), = statements("lp_msamp", "FP8RecipeKwargs")
recipe_names = {"FP8RecipeKwargs": FP8RecipeKwargs}
recipe_documented = outcome(recipe, dict(recipe_names))
recipe_corrected = outcome(recipe.replace("optimization_level=", "opt_level="), dict(recipe_names))
_claims.equal(
    "fp8_recipe_optimization_level_rejected",
    measured=rejects(recipe_documented, "optimization_level", "opt_level"),
    control=rejects(recipe_corrected, "optimization_level", "opt_level"),  # control: opt_level="O2"
    expected=1,
    doc_line=recipe_line,
    documented=recipe_documented,
    corrected=recipe_corrected,  # bound; FP8RecipeKwargs then runs TERecipeKwargs's TransformerEngine check
    # the class the guide's own text recommends (line 42), with the right keyword: built, no backend needed
    msamp_recipe_kwargs=outcome('MSAMPRecipeKwargs(opt_level="O2")', {"MSAMPRecipeKwargs": MSAMPRecipeKwargs}),
)

(plugin, plugin_line), = statements("lp_ao", "FullyShardedDataParallelPlugin")
plugin_names = {"FullyShardedDataParallelPlugin": FullyShardedDataParallelPlugin}
plugin_ns = dict(plugin_names)
plugin_documented = outcome(plugin, dict(plugin_names))
plugin_corrected = outcome(plugin.replace("fsdp_auto_wrap_policy=", "auto_wrap_policy="), plugin_ns)
_claims.equal(
    "fsdp_plugin_fsdp_auto_wrap_policy_rejected",
    measured=plugin_documented.split(":")[0],
    control=plugin_corrected,  # control: auto_wrap_policy="TRANSFORMER_BASED_WRAP"
    expected="TypeError",
    doc_line=plugin_line,
    documented=plugin_documented,
    corrected_policy=getattr(getattr(plugin_ns.get("fsdp2_plugin"), "auto_wrap_policy", None), "__name__", None),
)

# --- 2. execution.md: on_local_process ------------------------------------------------------------------------------
source, local_line = block("exec_local_process")
ran = []
local_names = {"do_thing_on_index_zero_on_each_server": lambda: ran.append(rank)}
setup = "from accelerate import Accelerator\naccelerator = Accelerator()\n"
local_documented = outcome(setup + source + "\ndo_my_thing()\n", dict(local_names))
ran_documented = list(ran)
local_corrected = outcome(setup + source.replace("local_process_idx=", "local_process_index=") + "\ndo_my_thing()\n",
                          dict(local_names))  # fmt: skip
_claims.equal(
    "on_local_process_local_process_idx_rejected",
    measured=local_documented.split(":")[0],
    control=local_corrected,  # control: local_process_index=0
    expected="TypeError",
    doc_line=local_line,
    documented=local_documented,
    ran_on_this_rank_corrected=bool(ran[len(ran_documented):]),  # True on local rank 0 only
)

# --- 3. training_tpu.md: downcast_bf16 -------------------------------------------------------------------------------
source, tpu_line = block("tpu_downcast")
tpu_documented = outcome(source, {"Accelerator": Accelerator})
os.environ["ACCELERATE_DOWNCAST_BF16"] = "true"  # the variable AcceleratorState reads (on TPU only)
try:
    tpu_corrected = outcome(source.replace(", downcast_bf16=True", ""), {"Accelerator": Accelerator})
finally:
    del os.environ["ACCELERATE_DOWNCAST_BF16"]
_claims.equal(
    "downcast_bf16_is_not_an_accelerator_argument",
    measured=tpu_documented.split(":")[0],
    control=tpu_corrected,  # control: Accelerator(mixed_precision="bf16") with ACCELERATE_DOWNCAST_BF16 set
    expected="TypeError",
    doc_line=tpu_line,
    documented=tpu_documented,
)

# --- 4. docstrings of the installed Accelerator --------------------------------------------------------------------
def docstring_statements(function, callee):
    """Statements of the docstring's code block that call `callee`, prompts (>>> and ...) removed."""
    example = inspect.getdoc(function).split("```python")[1].split("```")[0]
    lines = [line[4:] if line[:4] in (">>> ", "... ") else line for line in example.split("\n")]
    source = "\n".join(line for line in lines if _parses(line.strip()) and not line.startswith(" "))
    return [ast.get_source_segment(source, node) for node in ast.parse(source).body
            if callee in {getattr(c.func, "id", None) for c in ast.walk(node) if isinstance(c, ast.Call)}]  # fmt: skip


(join_call,) = docstring_statements(Accelerator.join_uneven_inputs, "Accelerator")
join_names = {"Accelerator": Accelerator, "DataLoaderConfiguration": DataLoaderConfiguration}
join_documented = outcome(join_call, dict(join_names))
join_corrected = outcome(
    join_call.replace("even_batches=True", "dataloader_config=DataLoaderConfiguration(even_batches=True)"),
    dict(join_names),
)
_claims.equal(
    "join_uneven_inputs_docstring_even_batches_rejected",
    measured=join_documented.split(":")[0],
    control=join_corrected,  # control: Accelerator(dataloader_config=DataLoaderConfiguration(even_batches=True))
    expected="TypeError",
    statement=join_call,
    documented=join_documented,
)

profile_calls = docstring_statements(Accelerator.profile, "Accelerator")
profile_names = {"Accelerator": Accelerator, "kwargs": ProfileKwargs()}
profile_documented = [outcome(call, dict(profile_names)) for call in profile_calls]
profile_corrected = [
    outcome(call.replace("kwarg_handler=", "kwargs_handlers="), dict(profile_names)) for call in profile_calls
]
_claims.equal(
    "profile_docstring_kwarg_handler_rejected",
    measured=sum(rejects(result, "kwarg_handler", "kwargs_handlers") for result in profile_documented),
    # control: kwargs_handlers=
    control=sum(rejects(result, "kwarg_handler", "kwargs_handlers") for result in profile_corrected),
    expected=2,
    statements=profile_calls,
    documented=profile_documented,
    corrected=profile_corrected,
)
torch.distributed.barrier()
