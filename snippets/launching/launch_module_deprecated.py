# The handout's "python -m torch.distributed.launch –nproc_per_node 2 –use_env script.py", checked
# without starting anything: torch.distributed.launch.main carries a deprecation ("Use torchrun"), and
# argparse does not read "–" (an en dash) as an option prefix, so the printed command names the wrong
# training script. Parse only: torch.distributed.launch.parse_args is the launcher's own parser.
# Negative controls: torchrun's main (torch.distributed.run.main) carries no deprecation; the same
# command with ASCII "--" parses as meant.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/launching/launch_module_deprecated.py
import torch.distributed.launch
import torch.distributed.run

import _claims

# The handout's method two, as printed, and with ASCII "--": parse only, start nothing.
handout = torch.distributed.launch.parse_args(["–nproc_per_node", "2", "–use_env", "multi-gpu-accelerate-cls.py"])
ascii_ = torch.distributed.launch.parse_args(["--nproc_per_node", "2", "--use_env", "multi-gpu-accelerate-cls.py"])
_claims.equal(
    "en_dash_flags_become_the_script_name",
    measured=[handout.training_script, str(handout.nproc_per_node), handout.use_env],
    control=[ascii_.training_script, str(ascii_.nproc_per_node), ascii_.use_env],
    expected=["–nproc_per_node", "1", False],
    handout_script_args=handout.training_script_args,
)
# torch.distributed.launch.main carries typing_extensions' @deprecated; torchrun's main does not.
_claims.equal(
    "torch_distributed_launch_is_deprecated",
    measured="Use torchrun" in (getattr(torch.distributed.launch.main, "__deprecated__", None) or ""),
    control="Use torchrun" in (getattr(torch.distributed.run.main, "__deprecated__", None) or ""),
    expected=True,
    message=getattr(torch.distributed.launch.main, "__deprecated__", None),
)
