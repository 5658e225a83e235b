"""Mutants for mixed-precision: the library bugs that the wrong answers on these pages describe.

Each is a plausible way torch's autocast, torch's GradScaler or Accelerate's mixed-precision wiring could
behave; the claims that name one must fail by their measured value in that world.
"""

from verify.mutation import mutant


# --- torch.autocast ---


@mutant("autocast-casts-nothing", "torch.autocast enters but casts nothing: every op runs in its input's dtype")
def autocast_casts_nothing(patch):
    from torch.amp.autocast_mode import autocast

    def init(original, self, *args, **kwargs):
        original(self, *args, **kwargs)
        self._enabled = False  # __enter__ then switches autocast off for the region

    patch.wrap(autocast, "__init__", init)


@mutant(
    "autocast-cache-disabled",
    "autocast ignores cache_enabled=True: a weight used twice in one region is cast (and kept) twice",
)
def autocast_cache_disabled(patch):
    from torch.amp.autocast_mode import autocast

    def init(original, self, *args, **kwargs):
        original(self, *args, **kwargs)
        self._cache_enabled = False

    patch.wrap(autocast, "__init__", init)


@mutant(
    "autocast-promotes-softmax-on-cpu",
    "CPU autocast runs softmax, log_softmax and layer_norm in float32, as CUDA autocast does",
)
def autocast_promotes_softmax_on_cpu(patch):
    import torch
    import torch.nn.functional as F

    def promoted(original, input, *args, **kwargs):
        if torch.is_autocast_enabled("cpu") and input.dtype in (torch.bfloat16, torch.float16):
            input = input.float()
        return original(input, *args, **kwargs)

    for name in ("softmax", "log_softmax", "layer_norm"):
        patch.wrap(F, name, promoted)


@mutant(
    "autocast-casts-parameters-in-place",
    "autocast converts the model itself: a Linear run under autocast has its weight and bias stored in 16 bits",
)
def autocast_casts_parameters_in_place(patch):
    import torch

    def forward(original, self, input):
        if torch.is_autocast_enabled("cpu"):
            dtype = torch.get_autocast_dtype("cpu")
            for p in (self.weight, self.bias):
                if p is not None and p.dtype != dtype:
                    p.data = p.data.to(dtype)
        return original(self, input)

    patch.wrap(torch.nn.Linear, "forward", forward)


# --- torch.amp.GradScaler ---


@mutant("gradscaler-never-backs-off", "GradScaler.update keeps the scale after an overflow (backoff factor 1)")
def gradscaler_never_backs_off(patch):
    from torch.amp.grad_scaler import GradScaler

    def update(original, self, *args, **kwargs):
        self._backoff_factor = 1.0
        return original(self, *args, **kwargs)

    patch.wrap(GradScaler, "update", update)


@mutant("gradscaler-ignores-init-scale", "GradScaler starts at 65536 whatever init_scale it is given")
def gradscaler_ignores_init_scale(patch):
    from torch.amp.grad_scaler import GradScaler

    def init(original, self, *args, **kwargs):
        kwargs.pop("init_scale", None)
        return original(self, *args, **kwargs)

    patch.wrap(GradScaler, "__init__", init)


@mutant("gradscaler-never-grows", "GradScaler.update never raises the scale after growth_interval clean steps")
def gradscaler_never_grows(patch):
    from torch.amp.grad_scaler import GradScaler

    def update(original, self, *args, **kwargs):
        self._growth_factor = 1.0
        return original(self, *args, **kwargs)

    patch.wrap(GradScaler, "update", update)


@mutant(
    "gradscaler-steps-through-overflow",
    "GradScaler.step calls optimizer.step() even when the gradients hold inf/NaN",
)
def gradscaler_steps_through_overflow(patch):
    from torch.amp.grad_scaler import GradScaler

    def maybe_step(original, self, optimizer, optimizer_state, *args, **kwargs):
        return optimizer.step(*args, **kwargs)

    patch.wrap(GradScaler, "_maybe_opt_step", maybe_step)


@mutant("gradscaler-does-not-scale-the-loss", "GradScaler.scale returns the loss unchanged (no multiplication by the scale)")
def gradscaler_does_not_scale_the_loss(patch):
    from torch.amp.grad_scaler import GradScaler

    def scale(original, self, outputs):
        original(self, outputs)  # keeps its bookkeeping (the scale tensor is created lazily)
        return outputs

    patch.wrap(GradScaler, "scale", scale)


@mutant(
    "gradscaler-unscales-fp16-grads",
    "GradScaler.unscale_ accepts float16 gradients instead of raising 'Attempting to unscale FP16 gradients.'",
)
def gradscaler_unscales_fp16_grads(patch):
    from torch.amp.grad_scaler import GradScaler

    def unscale(original, self, optimizer, inv_scale, found_inf, allow_fp16):
        return original(self, optimizer, inv_scale, found_inf, True)

    patch.wrap(GradScaler, "_unscale_grads_", unscale)


@mutant(
    "gradscaler-skips-fused-step",
    "GradScaler treats a fused optimizer like any other: it skips its step() on an overflow instead of calling it",
)
def gradscaler_skips_fused_step(patch):
    from torch.amp.grad_scaler import GradScaler

    def step(original, self, optimizer, *args, **kwargs):
        if not getattr(optimizer, "_step_supports_amp_scaling", False):
            return original(self, optimizer, *args, **kwargs)
        optimizer._step_supports_amp_scaling = False
        try:
            return original(self, optimizer, *args, **kwargs)
        finally:
            optimizer._step_supports_amp_scaling = True

    patch.wrap(GradScaler, "step", step)


@mutant(
    "fused-optimizer-ignores-found-inf",
    "the fused Adam/AdamW kernel applies the update even when GradScaler's found_inf says the gradients overflowed",
)
def fused_optimizer_ignores_found_inf(patch):
    import importlib

    adam_module = importlib.import_module("torch.optim.adam")  # the module, not the function torch.optim.adam

    def fused(original, *args, **kwargs):
        kwargs["found_inf"] = None
        return original(*args, **kwargs)

    patch.wrap(adam_module, "_fused_adam", fused)


# --- DDP under AMP ---


@mutant(
    "ddp-keeps-local-gradients",
    "DDP's backward does not all-reduce: each rank keeps the gradients of its own batch",
)
def ddp_keeps_local_gradients(patch):
    import torch
    from torch.nn.parallel import DistributedDataParallel

    def local_hook(state, bucket):
        future = torch.futures.Future()
        future.set_result(bucket.buffer())
        return future

    def init(original, self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.register_comm_hook(None, local_hook)

    patch.wrap(DistributedDataParallel, "__init__", init)


# --- Accelerate's wiring ---


@mutant(
    "fp16-on-cpu-autocasts",
    "Accelerator(mixed_precision='fp16') on a CPU turns on fp16 autocast (native_amp) as it does for bf16",
)
def fp16_on_cpu_autocasts(patch):
    from accelerate import Accelerator

    def init(original, self, *args, **kwargs):
        original(self, *args, **kwargs)
        if self.state.mixed_precision == "fp16" and self.device.type == "cpu":
            self.native_amp = True

    patch.wrap(Accelerator, "__init__", init)


@mutant(
    "convert-outputs-to-fp32-is-identity",
    "Accelerate's prepared forward returns the 16-bit outputs of autocast as they are (no convert_outputs_to_fp32)",
)
def convert_outputs_to_fp32_is_identity(patch):
    from accelerate.utils.operations import ConvertOutputsToFp32

    def call(original, self, *args, **kwargs):
        return self.model_forward(*args, **kwargs)

    patch.wrap(ConvertOutputsToFp32, "__call__", call)


@mutant("backward-ignores-scaler", "accelerator.backward calls loss.backward() even when there is a GradScaler")
def backward_ignores_scaler(patch):
    from accelerate import Accelerator

    def backward(original, self, loss, **kwargs):
        if self.scaler is not None:
            self.scaler.scale(loss)  # the scale is set up as usual; the scaled loss is not what runs backward
        scaler, self.scaler = self.scaler, None
        try:
            return original(self, loss, **kwargs)
        finally:
            self.scaler = scaler

    patch.wrap(Accelerator, "backward", backward)


@mutant(
    "clip-grad-norm-skips-unscale",
    "accelerator.clip_grad_norm_ clips the scaled gradients, like torch.nn.utils.clip_grad_norm_ (no unscale_ first)",
)
def clip_grad_norm_skips_unscale(patch):
    from accelerate import Accelerator

    patch.replace(Accelerator, "unscale_gradients", lambda self, optimizer=None: None)


@mutant(
    "accelerated-optimizer-never-flags-overflow",
    "the prepared optimizer's step_was_skipped stays False after GradScaler skipped the step",
)
def accelerated_optimizer_never_flags_overflow(patch):
    from accelerate.optimizer import AcceleratedOptimizer

    def step(original, self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        self._is_overflow = False
        return result

    patch.wrap(AcceleratedOptimizer, "step", step)


@mutant(
    "step-was-skipped-reads-the-scale",
    "Accelerate flags a skipped step by the scale dropping in scaler.update(), so it also sees a fused optimizer's skip",
)
def step_was_skipped_reads_the_scale(patch):
    from accelerate.optimizer import AcceleratedOptimizer

    def step(original, self, *args, **kwargs):
        if self.scaler is None or not self.gradient_state.sync_gradients:
            return original(self, *args, **kwargs)
        before = self.scaler.get_scale()
        result = original(self, *args, **kwargs)
        self._is_overflow = self.scaler.get_scale() < before
        return result

    patch.wrap(AcceleratedOptimizer, "step", step)


# --- the warning filter accelerate/scheduler.py installs at import ---


def _is_accelerate_filter(entry):
    action, _message, category, module, _lineno = entry
    return action == "ignore" and module is not None and module.pattern == "torch.optim.lr_scheduler"


@mutant(
    "accelerate-installs-no-scheduler-filter",
    "importing accelerate leaves the warning filters alone (no 'ignore' filter for torch.optim.lr_scheduler)",
)
def accelerate_installs_no_scheduler_filter(patch):
    import warnings

    def enter(original, self):
        result = original(self)
        kept = [entry for entry in warnings.filters if not _is_accelerate_filter(entry)]
        warnings.filters[:] = kept  # the copy catch_warnings made; it puts the original back on exit
        warnings._filters_mutated()
        return result

    patch.wrap(warnings.catch_warnings, "__enter__", enter)


@mutant(
    "accelerate-filter-silences-all-scheduler-warnings",
    "importing accelerate hides the 'lr_scheduler.step() before optimizer.step()' warning wherever it is raised",
)
def accelerate_filter_silences_all_scheduler_warnings(patch):
    import warnings

    def enter(original, self):
        result = original(self)
        patch.ran()
        warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler\.step\(\)`", category=UserWarning)
        return result

    patch.wrap(warnings.catch_warnings, "__enter__", enter)


class _Method:
    """A method that is not a plain function, so that only an explicit `patch.ran()` records that it ran."""

    def __init__(self, function):
        self.function = function

    def __get__(self, instance, owner):
        return self.function if instance is None else (lambda *args, **kwargs: self.function(instance, *args, **kwargs))


@mutant(
    "autocast-runs-reductions-in-fp32",
    "CPU autocast runs sum and mean in float32, so a loss built from them comes out float32 whatever its input",
)
def autocast_runs_reductions_in_fp32(patch):
    import torch

    for name in ("sum", "mean"):
        original = getattr(torch.Tensor, name)

        def promoted(self, *args, _original=original, **kwargs):
            if torch.is_autocast_enabled("cpu") and self.dtype in (torch.bfloat16, torch.float16):
                patch.ran()
                self = self.float()
            return _original(self, *args, **kwargs)

        patch.replace(torch.Tensor, name, _Method(promoted))


@mutant(
    "accelerate-builds-grad-scaler-for-bf16",
    "Accelerator(mixed_precision='bf16') builds a GradScaler as it does for fp16, so accelerator.backward "
    "scales the bf16 loss",
)
def accelerate_builds_grad_scaler_for_bf16(patch):
    import torch
    from accelerate import Accelerator

    def init(original, self, *args, **kwargs):
        original(self, *args, **kwargs)
        if self.state.mixed_precision == "bf16" and self.scaler is None:
            # get_grad_scaler() would give GradScaler("cuda"); the device's own type runs on a CPU too
            self.scaler = torch.amp.GradScaler(self.device.type)

    patch.wrap(Accelerator, "__init__", init)


# --- tf32-matmul-precision (pages-a) -------------------------------------------------------------
# Both flip a process-wide torch setting for the snippet's run, the world the wrong answer describes;
# the settings are C++ globals behind module attributes that cannot be deleted, so the undo calls the
# setter again instead of Patch's attribute restore.
@mutant("tf32-on-by-default", "PyTorch turns TF32 on for float32 matmuls by default (precision 'high')")
def tf32_on_by_default(patch):
    import torch

    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    patch.ran()
    patch._undo.append(lambda: torch.set_float32_matmul_precision(before))


@mutant("cudnn-tf32-off-by-default", "TF32 is off by default for cuDNN convolutions too, like matmuls")
def cudnn_tf32_off_by_default(patch):
    import torch

    before = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    patch.ran()
    patch._undo.append(lambda: setattr(torch.backends.cudnn, "allow_tf32", before))


@mutant("bf16-reduced-precision-off-by-default", "bf16 GEMMs reduce in full float32 unless you allow otherwise")
def bf16_reduced_precision_off_by_default(patch):
    import torch

    matmul = torch.backends.cuda.matmul
    before = matmul.allow_bf16_reduced_precision_reduction
    matmul.allow_bf16_reduced_precision_reduction = False
    patch.ran()
    patch._undo.append(lambda: setattr(matmul, "allow_bf16_reduced_precision_reduction", before))


@mutant("msamp-defaults-to-o1", "Accelerate's MS-AMP FP8 recipe defaults to opt_level 'O1' (FP8 weights and gradients only)")
def msamp_defaults_to_o1(patch):
    from accelerate.utils import MSAMPRecipeKwargs

    def o1(original, self):
        if self.opt_level is None:
            self.opt_level = "O1"
        return original(self)

    patch.wrap(MSAMPRecipeKwargs, "__post_init__", o1)
