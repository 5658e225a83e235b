# Does the installed Accelerate have every API this site's answers use? Each name is looked up in
# the installed package, so a version too old (or a name that never existed) shows up as missing.
# Since 1.0 the data-loader switches (even_batches, use_seedable_sampler, ...) live in
# DataLoaderConfiguration, no longer in Accelerator(...), so code written for 0.x can fail on 1.x.
# Negative controls: the handout's "DataLoaderTransforms" is reported missing by the same lookup;
# the same data-loader switches passed through DataLoaderConfiguration take effect, where passed to
# Accelerator(...) as in 0.x they raise TypeError (even_batches, use_seedable_sampler) or are
# silently ignored (split_batches).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/launching/installed_versions_support_page_apis.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import dataclasses
import importlib
import importlib.metadata
import inspect

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration

import _claims

accelerator = Accelerator()

# "module:attribute" for every Accelerate API the pages use.
PAGE_APIS = [
    "accelerate:Accelerator", "accelerate:PartialState", "accelerate:notebook_launcher",
    "accelerate:debug_launcher", "accelerate:find_executable_batch_size", "accelerate:skip_first_batches",
    "accelerate.Accelerator:prepare", "accelerate.Accelerator:backward", "accelerate.Accelerator:gather",
    "accelerate.Accelerator:gather_for_metrics", "accelerate.Accelerator:accumulate",
    "accelerate.Accelerator:no_sync", "accelerate.Accelerator:autocast", "accelerate.Accelerator:unwrap_model",
    "accelerate.Accelerator:save_state", "accelerate.Accelerator:load_state",
    "accelerate.Accelerator:skip_first_batches", "accelerate.Accelerator:wait_for_everyone",
    "accelerate.Accelerator:split_between_processes", "accelerate.Accelerator:main_process_first",
    "accelerate.utils:set_seed", "accelerate.utils:DataLoaderConfiguration",
    "accelerate.utils:InitProcessGroupKwargs", "accelerate.utils:DistributedDataParallelKwargs",
    "accelerate.utils:GradScalerKwargs", "accelerate.utils:AutocastKwargs",
    "accelerate.utils:broadcast_object_list", "accelerate.utils:synchronize_rng_states",
    "accelerate.utils:find_executable_batch_size", "accelerate.data_loader:prepare_data_loader",
    "accelerate.data_loader:SeedableRandomSampler", "accelerate.utils.modeling:get_mixed_precision_context_manager",
    "accelerate.utils.operations:convert_outputs_to_fp32", "accelerate.utils:parse_flag_from_env",
    "accelerate.utils.environment:get_cpu_distributed_information", "accelerate.state:PartialState",
    "accelerate.Accelerator:print", "accelerate.Accelerator:is_main_process", "accelerate.Accelerator:device",
    "accelerate.Accelerator:process_index", "accelerate.Accelerator:local_process_index",
    "accelerate.Accelerator:num_processes", "accelerate.Accelerator:distributed_type",
    "accelerate.Accelerator:sync_gradients", "accelerate.Accelerator:end_training", "accelerate.utils:gather_object",
    # attributes set in Accelerator.__init__, looked up on the live object
    "accelerator:native_amp", "accelerator:scaler", "accelerator:autocast_handler", "accelerator:state",
]
HANDOUT_APIS = ["accelerate:DataLoaderTransforms"]


def missing(names):
    absent = []
    for name in names:
        module, attribute = name.split(":")
        if module == "accelerator":
            if not hasattr(accelerator, attribute):
                absent.append(name)
            continue
        try:
            owner = importlib.import_module(module)
        except ImportError:  # "accelerate.Accelerator" is a class, not a module
            parent, _, child = module.rpartition(".")
            owner = getattr(importlib.import_module(parent), child)
        if not hasattr(owner, attribute):
            absent.append(name)
    return absent


_claims.equal(
    "installed_version_has_page_apis",
    measured=missing(PAGE_APIS),
    control=missing(HANDOUT_APIS),
    expected=[],
    apis_checked=len(PAGE_APIS),
    accelerate=importlib.metadata.version("accelerate"),
    torch=torch.__version__,
    torch_cuda=torch.version.cuda,  # None on a CPU-only build such as 2.x+cpu
    handout_pin="0.17.1",
)

# What 0.x-style code gets on this version: each data-loader switch passed to Accelerator(...) as in
# 0.x, against the same switch passed through DataLoaderConfiguration (the 1.x route). We read the
# value that took effect (accelerator.dataloader_config), or the error.
SWITCHES = {"even_batches": False, "use_seedable_sampler": True, "split_batches": True}  # each off its default


def takes_effect(name, value, route):
    try:
        if route == "Accelerator(...)":
            built = Accelerator(**{name: value})
        else:
            built = Accelerator(dataloader_config=DataLoaderConfiguration(**{name: value}))
    except TypeError:
        return "TypeError"
    return getattr(built.dataloader_config, name)


_claims.equal(
    "dataloader_switches_live_in_dataloader_configuration",
    measured=[takes_effect(name, value, "Accelerator(...)") for name, value in SWITCHES.items()],
    control=[takes_effect(name, value, "DataLoaderConfiguration") for name, value in SWITCHES.items()],
    expected=["TypeError", "TypeError", False],  # split_batches: accepted, and ignored
    switches=SWITCHES,
    dataloader_configuration_fields=sorted(field.name for field in dataclasses.fields(DataLoaderConfiguration)),
    accelerator_parameters_among_switches=[name for name in SWITCHES if name in inspect.signature(Accelerator.__init__).parameters],
)
