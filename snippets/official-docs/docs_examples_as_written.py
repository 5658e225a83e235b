# Code examples of Accelerate's guides that fail as written, run on 2 ranks: each excerpt (from _doc_excerpts.py,
# copied byte for byte from the docs' sources) is run or parsed exactly as the page shows it, then with the one
# correction, and both outcomes are reported.
#
# 1. usage_guides/gradient_accumulation.md, the self-contained example: `import contexlib` (the code uses contextlib).
# 2. concept_guides/sequence_parallelism.md: `sp_seq_length_is_variable: true,` inside a Python call.
# 3. usage_guides/deepspeed_multiple_model.md: trailing commas in both JSON configs, which
#    DeepSpeedPlugin(hf_ds_config=path) reads with json.load.
# 4. usage_guides/tracking.md: the custom tracker keeps `run` in a local variable, its `tracker` property reads
#    self.run; and the Neptune example calls `accelerate.prepare` (the object is `accelerator`).
# 5. concept_guides/big_model_inference.md: generate(x1, ...) after storing `inputs`; hid_3 = model_3(hid_3).
#
# wandb, neptune and minGPT are not installed here: the examples get small stand-in modules for them (an object
# with the attributes the example uses), never for a name whose absence is the erratum.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/official-docs/docs_examples_as_written.py
import json
import os
import re
import shutil
import sys
import tempfile
import traceback
import types

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState, GradientState
from accelerate.utils import DeepSpeedPlugin

import _claims
from _doc_excerpts import EXCERPTS


def code(key):
    """The excerpt's text without its Markdown fences."""
    lines = EXCERPTS[key]["text"].split("\n")
    return "\n".join(line for line in lines if not line.lstrip().startswith("```"))


def run(source, namespace, name="<doc>"):
    """Run source as a module; return (exception class name or 'none', message, line within source)."""
    try:
        exec(compile(source, name, "exec"), namespace)
    except Exception as error:  # the documented code failing is the measurement
        frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == name]
        return type(error).__name__, str(error), (frames[-1].lineno if frames else getattr(error, "lineno", None))
    return "none", "", None


def doc_line(key, line_in_code):
    """Line of the documentation file for a line of code(key) (the opening fence is not part of the code)."""
    first = EXCERPTS[key]["main"][0] + (1 if EXCERPTS[key]["text"].startswith("```") else 0)
    return None if line_in_code is None else first + line_in_code - 1


def fresh_state():
    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()


def stand_in(name, **attributes):
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    return module


rank = Accelerator().process_index

# --- 1. gradient_accumulation.md: the self-contained causal LM example, on 2 ranks -----------------------------
example = code("ga_full_example")
fresh_state()
documented = run(example, {"__name__": "__doc_example__"}, "<gradient_accumulation.md>")
fresh_state()
corrected_ns = {"__name__": "__doc_example__"}
corrected = run(example.replace("import contexlib", "import contextlib"), corrected_ns, "<gradient_accumulation.md>")
details = {}
if corrected[0] == "none" and rank == 0:  # the example trains model_clone on the main process only
    accumulated = corrected_ns["accelerator"].unwrap_model(corrected_ns["model"]).weight.detach().squeeze()
    details = dict(
        weight_with_accumulation=accumulated,
        weight_without_accumulation=corrected_ns["model_clone"].weight.detach().squeeze(),
    )
fresh_state()
_claims.equal(
    "ga_example_imports_contexlib",
    measured=documented[0],
    control=corrected[0],  # control: the same example with `import contextlib`
    expected="ModuleNotFoundError",
    message=documented[1],
    doc_line=doc_line("ga_full_example", documented[2]),
    **details,
)

# --- 2. sequence_parallelism.md: the code of the diff, as it reads after the change --------------------------------
diff = code("sp_diff").split("\n")
after_change = "\n".join(line[1:] if line.startswith("+") else line for line in diff if not line.startswith("-"))
after_change = after_change.replace("Accelerator(\n    ...,", "Accelerator(")  # `...` stands for other arguments
fixed_sp = re.sub(r"(\w+): true,", r"\1=True,", after_change)
sp_documented = run(after_change, {}, "<sequence_parallelism.md>")
sp_fixed = run("def build():\n" + "\n".join("    " + line for line in fixed_sp.split("\n")), {}, "<fixed>")
_claims.equal(
    "sp_example_is_a_syntax_error",
    measured=sp_documented[0],
    control=sp_fixed[0],  # control: `sp_seq_length_is_variable=True,` (compiled, not called: no DeepSpeed here)
    expected="SyntaxError",
    doc_line=doc_line("sp_diff", sp_documented[2]),
)

# --- 3. deepspeed_multiple_model.md: the two JSON configs, loaded by DeepSpeedPlugin ---------------------------
folder = tempfile.mkdtemp()


def plugin_loads(key, text):
    path = os.path.join(folder, f"{key}.json")
    with open(path, "w") as f:
        f.write(text)
    try:
        return DeepSpeedPlugin(hf_ds_config=path).zero_stage
    except json.JSONDecodeError as error:
        return f"JSONDecodeError at line {doc_line(key, error.lineno)}"


documented_json = {key: plugin_loads(key, code(key)) for key in ("ds_zero3_json", "ds_zero2_json")}
fixed_json = {key: plugin_loads(key, re.sub(r",(\s*[}\]])", r"\1", code(key))) for key in documented_json}
shutil.rmtree(folder, ignore_errors=True)
_claims.equal(
    "ds_multi_model_json_configs_invalid",
    measured=sum(isinstance(stage, int) for stage in documented_json.values()),
    control=sum(isinstance(stage, int) for stage in fixed_json.values()),  # control: trailing commas removed
    expected=0,
    documented=documented_json,
    trailing_commas_removed=fixed_json,  # ZeRO stages the plugin read
)

# --- 4. tracking.md: the custom tracker, and the Neptune example ------------------------------------------------
run_object = object()
wandb = stand_in("wandb", init=lambda *args, **kwargs: run_object, log=lambda *a, **k: None, config={})


def tracker_property(source):
    sys.modules["wandb"] = wandb
    try:
        namespace = {"__name__": "__doc_tracker__"}
        exec(compile(source, "<tracking.md>", "exec"), namespace)
        tracker = namespace["MyCustomTracker"]("some_run_name")
        try:
            return "returns the run" if tracker.tracker is run_object else "returns something else"
        except AttributeError as error:
            return f"AttributeError: {error}"
    finally:
        del sys.modules["wandb"]


tracker_doc = code("tracker_class")
tracker_fixed = tracker_doc.replace("        run = wandb.init(", "        self.run = wandb.init(").replace(
    "return self.run.run", "return self.run"
)
if rank == 0:  # the tracker's __init__ is @on_main_process: on other ranks it does nothing, as documented
    _claims.equal(
        "custom_tracker_property_reads_unset_attribute",
        measured=tracker_property(tracker_doc).split(":")[0],
        control=tracker_property(tracker_fixed).split(":")[0],  # control: self.run = wandb.init(...); return self.run
        expected="AttributeError",
        documented=tracker_property(tracker_doc),
    )

neptune_diff = code("tracker_neptune").split("\n")
neptune = "\n".join(line[2:] for line in neptune_diff if line[:2] in ("  ", "+ "))
setup = neptune.split("\nfor iteration")[0]  # imports, Accelerator(), init_run, prepare, device: before the loop
fresh_state()
neptune_ns = {
    "my_model": torch.nn.Linear(4, 1),
    "my_optimizer": None,
    "my_training_dataloader": torch.utils.data.DataLoader(list(range(4))),
}
neptune_ns["my_optimizer"] = torch.optim.SGD(neptune_ns["my_model"].parameters(), lr=0.1)
sys.modules["neptune"] = stand_in("neptune", init_run=lambda *a, **k: {})
try:
    neptune_documented = run(setup, dict(neptune_ns), "<tracking.md>")
    fresh_state()
    neptune_fixed = run(setup.replace("accelerate.prepare(", "accelerator.prepare("), dict(neptune_ns), "<fixed>")
finally:
    del sys.modules["neptune"]
fresh_state()
_claims.equal(
    "neptune_example_calls_accelerate_prepare",
    measured=neptune_documented[0],
    control=neptune_fixed[0],  # control: accelerator.prepare(...)
    expected="NameError",
    message=neptune_documented[1],
    doc_line=None if neptune_documented[2] is None else doc_line("tracker_neptune", 1 + [
        i for i, line in enumerate(neptune_diff) if line[:2] in ("  ", "+ ")][neptune_documented[2] - 1]),
)

# --- 5. big_model_inference.md: generate(x1) and hid_3 = model_3(hid_3) ------------------------------------------
class StandInTokenizer:  # minGPT's BPETokenizer is not installed: token ids as a tensor, as it returns
    def __call__(self, text):
        return torch.tensor([[15496, 11, 616, 1438, 318]])

    def decode(self, ids):
        return "decoded"


class StandInModel:  # the minGPT model the page dispatched earlier: generate() returns the prompt plus new ids
    def generate(self, idx, max_new_tokens, do_sample):
        return torch.cat([idx, torch.zeros(1, max_new_tokens, dtype=idx.dtype)], dim=1)


sys.modules["mingpt"] = stand_in("mingpt")
sys.modules["mingpt.bpe"] = stand_in("mingpt.bpe", BPETokenizer=StandInTokenizer)
generate_source = code("bmi_generate").replace(".to(0)", ".to('cpu')")  # device 0 is a GPU; this runs on CPU
try:
    generate_documented = run(generate_source, {"model": StandInModel()}, "<big_model_inference.md>")
    corrected_source = generate_source.replace("generate(x1,", "generate(inputs,")
    generate_fixed = run(corrected_source, {"model": StandInModel()}, "<fixed>")
finally:
    del sys.modules["mingpt.bpe"], sys.modules["mingpt"]
_claims.equal(
    "big_model_generate_passes_undefined_x1",
    measured=generate_documented[0],
    control=generate_fixed[0],  # control: model.generate(inputs, ...)
    expected="NameError",
    message=generate_documented[1],
    doc_line=doc_line("bmi_generate", generate_documented[2]),
)

from accelerate import cpu_offload_with_hook  # noqa: E402  (the page's import, done here for the example)

torch.manual_seed(0)
offload_ns = {
    "cpu_offload_with_hook": cpu_offload_with_hook,
    "execution_device": torch.device("cpu"),
    "model_1": torch.nn.Linear(4, 4),
    "model_2": torch.nn.Linear(4, 4),
    "model_3": torch.nn.Linear(4, 2),
    "input": torch.randn(3, 4),
}
hook_documented = run(code("bmi_offload_hook"), dict(offload_ns), "<big_model_inference.md>")
fixed_ns = dict(offload_ns)
hook_fixed = run(code("bmi_offload_hook").replace("hid_3 = model_3(hid_3)", "hid_3 = model_3(hid_2)"), fixed_ns, "<f>")
_claims.equal(
    "offload_hook_example_uses_hid_3_before_assignment",
    measured=hook_documented[0],
    control=hook_fixed[0],  # control: hid_3 = model_3(hid_2)
    expected="NameError",
    message=hook_documented[1],
    doc_line=doc_line("bmi_offload_hook", hook_documented[2]),
    corrected_output_shape=list(fixed_ns["hid_3"].shape) if "hid_3" in fixed_ns else None,
)
