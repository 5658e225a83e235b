# DeepSpeed through Accelerate: what the config holds before and after Accelerate fills its "auto"
# values. Runs WITHOUT the deepspeed package: DeepSpeedPlugin and its config helper are Accelerate's own
# (accelerate/utils/dataclasses.py, accelerate/utils/deepspeed.py); deepspeed.initialize itself needs
# the package and, in practice, a GPU.
#   1. DeepSpeedPlugin(zero_stage=2, ...) builds a config whose batch sizes are "auto".
#   2. Accelerator._prepare_deepspeed computes the values below from the prepared DataLoader, the
#      number of processes and gradient_accumulation_steps, and hands them to the plugin's
#      deepspeed_config_process(must_match=False, ...): "auto" entries take them, explicit entries are
#      kept even when they disagree.
#   3. The ZeRO stage: zero_stage=3, or "stage": 3 in the user's config, against the stage given nowhere
#      (no argument, or "auto" in the config): then the plugin's default, 2.
# Negative controls: a user config (hf_ds_config) with explicit numbers instead of "auto"; the stage
# given nowhere.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/sharded-training/deepspeed_plugin_auto_values.py
import copy

from accelerate import Accelerator
from accelerate.utils import DeepSpeedPlugin

import _claims

accelerator = Accelerator()
world = accelerator.num_processes
MICRO_BATCH, ACCUMULATION = 8, 4

# --- 1. The plugin's own config: stage, accumulation and clipping from arguments, batch sizes "auto" --
plugin = DeepSpeedPlugin(zero_stage=2, gradient_accumulation_steps=ACCUMULATION, gradient_clipping=1.0)
before = copy.deepcopy(plugin.deepspeed_config)

# --- A user's JSON config, as `hf_ds_config` (a dict, or the path of a JSON file) ---------------------
def user_config(stage):
    return {
        "train_micro_batch_size_per_gpu": 16,  # explicit: disagrees with the DataLoader's 8
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "zero_optimization": {"stage": stage, "reduce_bucket_size": "auto"},
    }


user = DeepSpeedPlugin(hf_ds_config=user_config(3))

# --- Where the ZeRO stage comes from: the plugin's argument, the config, or neither ("auto") --------
stage3_by_argument = DeepSpeedPlugin(zero_stage=3)
no_stage_given = DeepSpeedPlugin()  # nothing: ACCELERATE_DEEPSPEED_ZERO_STAGE, else 2
config_stage_auto = DeepSpeedPlugin(hf_ds_config=user_config("auto"))  # "auto": the plugin's own stage

# --- 2. What _prepare_deepspeed passes (accelerate/accelerator.py): the DataLoader's batch size, ------
#        train_batch_size = micro * accumulation * processes, gradient_clipping 1.0 if "auto" ------------
config_kwargs = {
    "train_micro_batch_size_per_gpu": MICRO_BATCH,
    "train_batch_size": MICRO_BATCH * ACCUMULATION * world,
    "gradient_clipping": 1.0,
    "zero_optimization.stage3_gather_16bit_weights_on_model_save": False,
    "zero_optimization.reduce_bucket_size": 32 * 32,  # hidden_size**2 for a model whose config has one
}
for ds in (plugin, user):  # first, as _prepare_deepspeed does: accumulation steps from the Accelerator
    ds.fill_match("gradient_accumulation_steps", must_match=False, gradient_accumulation_steps=ACCUMULATION)
plugin.deepspeed_config_process(must_match=False, **config_kwargs)
user.deepspeed_config_process(must_match=False, **config_kwargs)
after, user_after = plugin.deepspeed_config, user.deepspeed_config

keys = ["train_micro_batch_size_per_gpu", "train_batch_size"]
_claims.equal(
    "plugin_leaves_batch_sizes_auto",
    measured=[before[k] for k in keys],
    control=[user.hf_ds_config.get_value(k) for k in keys],  # explicit numbers where the user wrote them
    expected=["auto", "auto"],
    plugin_config=before,
)
_claims.equal(
    "auto_values_filled_from_training_setup",
    measured=[after[k] for k in keys],
    control=[user_after.get(k) for k in keys],  # the explicit 16 stays, though the DataLoader says 8
    expected=[MICRO_BATCH, MICRO_BATCH * ACCUMULATION * world],
    filled_config=after,
    user_config_after=user_after,
)
_claims.equal(
    "zero_stage_from_plugin_or_config",
    # [the plugin's stage, the stage of the config the plugin carries] for: zero_stage=3 / a config with 3
    measured=[stage3_by_argument.zero_stage, stage3_by_argument.deepspeed_config["zero_optimization"]["stage"],
              user.zero_stage, user.hf_ds_config.is_zero3()],  # fmt: skip
    # the same, with the stage given nowhere: no argument / "stage": "auto" in the config
    control=[no_stage_given.zero_stage, no_stage_given.deepspeed_config["zero_optimization"]["stage"],
             config_stage_auto.zero_stage, config_stage_auto.hf_ds_config.is_zero3()],  # fmt: skip
    expected=[3, 3, 3, True],
    stage_given_nowhere=no_stage_given.zero_stage,
    auto_stage_in_config_becomes=config_stage_auto.deepspeed_config["zero_optimization"]["stage"],
    user_gradient_accumulation_steps=user_after["gradient_accumulation_steps"],
)
