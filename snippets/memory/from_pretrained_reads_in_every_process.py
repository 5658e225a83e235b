# Setting cpu_ram_efficient_loading is not enough with transformers 5.x: with the environment that
# `accelerate launch --use_fsdp --fsdp_cpu_ram_efficient_loading true` exports (ACCELERATE_USE_FSDP,
# FSDP_CPU_RAM_EFFICIENT_LOADING), transformers' is_fsdp_enabled() is true, and yet from_pretrained on rank 1
# still reads the checkpoint and fills its model with the checkpoint's values: every process holds a full
# copy. (transformers 4.x left the weights of the non-zero local ranks empty, to be broadcast from rank 0.)
# Measured on rank 1: the fraction of its parameter elements equal to the checkpoint's. Negative control:
# the same model class built from the same config without reading the checkpoint (from_config).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/memory/from_pretrained_reads_in_every_process.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import os
import tempfile

import torch
from accelerate import Accelerator
from accelerate.utils import broadcast_object_list
from safetensors.torch import load_file
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.integrations import is_fsdp_enabled

import _claims

accelerator = Accelerator()
config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                     num_key_value_heads=2, vocab_size=128)  # fmt: skip
# what `accelerate launch` exports for FSDP with cpu_ram_efficient_loading (prepare_multi_gpu_env)
os.environ["ACCELERATE_USE_FSDP"] = "true"
os.environ["FSDP_CPU_RAM_EFFICIENT_LOADING"] = "true"


def fraction_equal(model, reference):
    equal = sum((p == reference[name]).sum().item() for name, p in model.named_parameters() if name in reference)
    return equal / sum(p.numel() for name, p in model.named_parameters() if name in reference)


with tempfile.TemporaryDirectory() as own:
    folder = broadcast_object_list([own])[0]  # rank 0's folder, on every rank
    if accelerator.is_main_process:
        torch.manual_seed(0)
        LlamaForCausalLM(config).save_pretrained(folder)
    accelerator.wait_for_everyone()
    checkpoint = load_file(os.path.join(folder, "model.safetensors"))
    fsdp_loading = is_fsdp_enabled()  # transformers' own test for cpu_ram_efficient_loading
    loaded = LlamaForCausalLM.from_pretrained(folder)
    torch.manual_seed(1)
    built = LlamaForCausalLM(config)  # control: the same model, its values not read from the checkpoint
    measured, control = fraction_equal(loaded, checkpoint), fraction_equal(built, checkpoint)
    elements = sum(t.numel() for t in checkpoint.values())
    accelerator.wait_for_everyone()  # rank 0 removes its folder only after every rank has read it

if not accelerator.is_main_process:
    # Judged only when transformers saw cpu_ram_efficient_loading (is_fsdp_enabled() True): without it
    # every rank reads the checkpoint anyway, and the claim would pass for the wrong reason.
    _claims.equal(
        "from_pretrained_reads_the_checkpoint_on_every_rank",
        measured=measured if fsdp_loading else None,
        control=control,
        expected=1.0,
        is_fsdp_enabled=fsdp_loading,
        checkpoint_elements=elements,
        loaded_dtype=str(next(loaded.parameters()).dtype),
    )
