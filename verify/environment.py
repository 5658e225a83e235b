"""What of the user's environment reaches a rank, and which of it can change a proof's result.

Two rules, one module, so snippets and labs follow the same ones:
- `scrubbed`: variables that would set a rank's identity or Accelerate's defaults behind the page's back
  (`ACCELERATE_GRADIENT_ACCUMULATION_STEPS=4` in a shell makes every `Accelerator()` accumulate) never
  reach a rank; the harness sets what it needs (`ACCELERATE_USE_CPU`) after scrubbing.
- `that_matters`: of what remains, every variable of a family that can change a measurement (torch's,
  the collectives', the thread pools', hashing, device visibility, the import path) is part of a proof's
  fingerprint and recorded in its evidence, so `--reuse-evidence` reruns a proof when one changes.
"""

from __future__ import annotations

from collections.abc import Mapping

# Set by a launcher for the process it starts; inherited ones would describe another job.
LAUNCHER_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                      "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "NODE_RANK",
                      "FORK_LAUNCHED", "PROOF_REPORT_FILE")  # fmt: skip
# Read by Accelerate (or torchrun's agent) as defaults of a run: a page states its settings in its code.
SCRUBBED_PREFIXES = ("ACCELERATE_", "TORCHELASTIC_", "FSDP_", "PARALLELISM_CONFIG_")
# Families that can change what a snippet measures, whoever set them (the user or the harness).
MATTERING_PREFIXES = ("ACCELERATE_", "TORCH", "PYTORCH_", "NCCL_", "GLOO_", "OMP_", "MKL_", "KMP_", "OPENBLAS_",
                      "CUDA_", "NVIDIA_", "HIP_", "ROCR_", "TRITON_", "XLA_", "HF_", "TRANSFORMERS_", "TOKENIZERS_",
                      "PYTHON", "LD_PRELOAD", "LD_LIBRARY_PATH", "MALLOC_")  # fmt: skip


def scrubbed(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without the launcher's and Accelerate's run variables."""
    return {name: value for name, value in environ.items()
            if name not in LAUNCHER_VARIABLES and not name.startswith(SCRUBBED_PREFIXES)}  # fmt: skip


def that_matters(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of a rank's environment that can change a proof's result, sorted by name."""
    return {name: environ[name] for name in sorted(environ) if name.startswith(MATTERING_PREFIXES)}
