"""Mutants for the memory pages: the library behaving the way the wrong answers say."""

from verify.mutation import mutant


@mutant("checkpoint-keeps-activations", "torch.utils.checkpoint runs the block normally and keeps its activations")
def checkpoint_keeps_activations(patch):
    import torch.utils.checkpoint

    patch.wrap(torch.utils.checkpoint, "checkpoint", lambda original, function, *args, **kwargs: function(*args))


@mutant("checkpoint-forgets-rng-state", "checkpoint recomputes with a fresh random state, so dropout draws a new mask")
def checkpoint_forgets_rng_state(patch):
    import torch.utils.checkpoint

    def fresh_rng(original, function, *args, **kwargs):
        return original(function, *args, **{**kwargs, "preserve_rng_state": False})

    patch.wrap(torch.utils.checkpoint, "checkpoint", fresh_rng)


@mutant("checkpoint-rng-off-by-default",
        "checkpoint restores the RNG state only when asked (preserve_rng_state defaults to False), so dropout "
        "draws a new mask in the recomputation")
def checkpoint_rng_off_by_default(patch):
    import torch.utils.checkpoint

    def rng_off_unless_given(original, function, *args, **kwargs):
        return original(function, *args, **{"preserve_rng_state": False, **kwargs})

    patch.wrap(torch.utils.checkpoint, "checkpoint", rng_off_unless_given)


@mutant("init-empty-weights-allocates", "init_empty_weights builds the model with real, allocated weights")
def init_empty_weights_allocates(patch):
    import contextlib

    import accelerate.big_modeling

    patch.wrap(accelerate.big_modeling, "init_on_device", lambda original, device, include_buffers=None: contextlib.nullcontext())


@mutant("adam-keeps-no-state", "AdamW keeps no per-parameter state between steps (no moment buffers)")
def adam_keeps_no_state(patch):
    import torch

    def stateless(original, self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        self.state.clear()  # the moments are dropped after every step
        return result

    patch.wrap(torch.optim.AdamW, "step", stateless)


@mutant(
    "ram-efficient-load-sends-nothing",
    "fsdp2_load_full_state_dict only allocates each rank's shards (to_empty) and never sends rank 0's weights: "
    "the ranks that built the model on meta keep uninitialised memory",
)
def ram_efficient_load_sends_nothing(patch):
    import accelerate.utils.fsdp_utils

    def allocate_only(original, accelerator, model, full_sd, cpu_offload=False):
        return model.to_empty(device="cpu")

    patch.wrap(accelerate.utils.fsdp_utils, "fsdp2_load_full_state_dict", allocate_only)


@mutant(
    "ram-efficient-load-receives-whole-model",
    "fsdp2_load_full_state_dict has every rank receive the whole state dict from rank 0 first and shard it "
    "afterwards, so each process holds a full copy during the load",
)
def ram_efficient_load_receives_whole_model(patch):
    import accelerate.utils.fsdp_utils

    def whole_model_first(original, accelerator, model, full_sd, cpu_offload=False):
        import torch
        import torch.distributed as dist

        if not accelerator.is_main_process:
            full_sd = {name: torch.empty(p.shape, dtype=p.dtype) for name, p in model.state_dict().items()}
        for tensor in full_sd.values():
            dist.broadcast(tensor.detach(), src=0)  # the whole model now sits in every process
        return original(accelerator, model, full_sd, cpu_offload=cpu_offload)

    patch.wrap(accelerate.utils.fsdp_utils, "fsdp2_load_full_state_dict", whole_model_first)


@mutant(
    "device-map-loads-whole-model-first",
    "load_checkpoint_and_dispatch loads the whole checkpoint into the model in CPU RAM first and only then "
    "moves each layer to the device its device map assigns (the layers mapped to disk included)",
)
def device_map_loads_whole_model_first(patch):
    import accelerate.big_modeling

    def whole_model_first(original, model, checkpoint, device_map=None, **kwargs):
        everything_on_cpu = None if device_map is None else {"": "cpu"}
        # dispatch_model, which load_checkpoint_and_dispatch calls next, then writes the disk layers out
        return original(model, checkpoint, device_map=everything_on_cpu, **{**kwargs, "offload_state_dict": False})

    patch.wrap(accelerate.big_modeling, "load_checkpoint_in_model", whole_model_first)


@mutant(
    "from-pretrained-skips-checkpoint-on-other-ranks",
    "with FSDP's cpu_ram_efficient_loading set, transformers' from_pretrained leaves the weights of every "
    "process but local rank 0 empty (uninitialised memory, for rank 0 to broadcast into) instead of reading "
    "the checkpoint there",
)
def from_pretrained_skips_checkpoint_on_other_ranks(patch):
    import torch
    from transformers import PreTrainedModel
    from transformers.distributed.utils import is_local_dist_rank_0
    from transformers.integrations import is_fsdp_enabled

    def empty_on_other_ranks(original, model, state_dict, checkpoint_files, load_config, *args, **kwargs):
        if is_fsdp_enabled() and not is_local_dist_rank_0():
            state_dict = {name: torch.empty(t.shape, dtype=t.dtype) for name, t in model.state_dict().items()}
            checkpoint_files = None  # the checkpoint is never read here: rank 0 is to broadcast the values
        return original(model, state_dict, checkpoint_files, load_config, *args, **kwargs)

    patch.wrap(PreTrainedModel, "_load_pretrained_model", empty_on_other_ranks)


# ---- memory/activation-memory-formula (pages-b)
@mutant(
    "dropout-mask-in-activation-dtype",
    "dropout keeps its mask in the activation's dtype (2 bytes per element in bf16), not as a 1-byte bool mask",
)
def dropout_mask_in_activation_dtype(patch):
    import torch

    def noise_times_input(original, input, p, train):
        if not train or p == 0:
            return original(input, p, train)
        noise = torch.empty_like(input).bernoulli_(1 - p).div_(1 - p)  # the multiply keeps `noise` for backward
        return input * noise, noise != 0

    patch.wrap(torch, "native_dropout", noise_times_input)


@mutant(
    "cpu-dropout-keeps-bool-mask",
    "eager F.dropout on a CPU tensor takes the fused path and keeps a 1-byte bool mask, as on CUDA",
)
def cpu_dropout_keeps_bool_mask(patch):
    import torch
    import torch.nn.functional

    def fused(original, input, p=0.5, training=True, inplace=False):
        if not training or p == 0 or inplace:
            return original(input, p, training, inplace)
        return torch.native_dropout(input, p, training)[0]

    patch.wrap(torch.nn.functional, "dropout", fused)


# --- the CUDA caching allocator page (memory/cuda-caching-allocator) ---------------------------------------
@mutant("empty-cache-is-a-no-op", "torch.cuda.empty_cache() releases nothing: cached blocks stay reserved and counted by the driver")
def empty_cache_is_a_no_op(patch):
    import torch

    patch.wrap(torch.cuda, "empty_cache", lambda original: None)
