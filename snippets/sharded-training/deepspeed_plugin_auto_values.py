# DeepSpeed through Accelerate: what the config holds before and after Accelerate fills its "auto"
# values. DeepSpeedPlugin and its config helper are Accelerate's own (accelerate/utils/dataclasses.py,
# accelerate/utils/deepspeed.py); the filling is Accelerator._prepare_deepspeed (accelerate/accelerator.py),
# the code prepare() runs under DeepSpeed. The deepspeed package is not installed here (and Accelerate
# does not route to DeepSpeed when the cpu flag is on), so the snippet calls _prepare_deepspeed itself
# with a stand-in for the deepspeed package whose initialize() records the config Accelerate hands it
# and stops there: every number below is read from that config, after Accelerate's code filled it.
#   1. DeepSpeedPlugin(zero_stage=2, ...) builds a config whose batch sizes are "auto".
#   2. _prepare_deepspeed fills "auto" from the DataLoaders passed with the model (the smaller batch
#      size, 8, of a train loader of 8 and an eval loader of 12), 4 accumulation steps and 2 processes.
#   3. An explicit micro batch (16) in the user's config is kept, and its "auto" train batch follows it.
#   4. The ZeRO stage given nowhere (no argument, or "auto" in the config) is the plugin's default, 2,
#      against zero_stage=3 or "stage": 3 in the user's config, which give 3.
# Negative controls: a user config (hf_ds_config) with an explicit micro batch instead of "auto"; the
# same entries before _prepare_deepspeed filled them; the stage given (3) instead of left to the default.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/sharded-training/deepspeed_plugin_auto_values.py
import copy
import sys
import types
from unittest import mock

import accelerate.accelerator
import torch
from accelerate import Accelerator
from accelerate.utils import DeepSpeedPlugin
from accelerate.utils.deepspeed import DummyOptim, DummyScheduler

import _claims

ACCUMULATION = 4
accelerator = Accelerator(gradient_accumulation_steps=ACCUMULATION)
world = accelerator.num_processes

# --- 1. The plugin's own config: stage, accumulation and clipping from arguments, batch sizes "auto" --
plugin = DeepSpeedPlugin(zero_stage=2, gradient_accumulation_steps=ACCUMULATION, gradient_clipping=1.0)
before = copy.deepcopy(plugin.deepspeed_config)


# --- A user's JSON config, as `hf_ds_config` (a dict, or the path of a JSON file) ---------------------
def user_config(stage):
    return {
        "train_micro_batch_size_per_gpu": 16,  # explicit: disagrees with the DataLoader's 8
        "train_batch_size": "auto",
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "zero_optimization": {"stage": stage, "reduce_bucket_size": "auto"},
    }


user = DeepSpeedPlugin(hf_ds_config=user_config(3))
user_before = copy.deepcopy(user.deepspeed_config)

# --- Where the ZeRO stage comes from: the plugin's argument, the config, or neither ("auto") --------
stage3_by_argument = DeepSpeedPlugin(zero_stage=3)
no_stage_given = DeepSpeedPlugin()  # nothing: ACCELERATE_DEEPSPEED_ZERO_STAGE, else 2
config_stage_auto = DeepSpeedPlugin(hf_ds_config=user_config("auto"))  # "auto": the plugin's own stage


# --- 2. and 3. Accelerate's own _prepare_deepspeed, up to deepspeed.initialize ---------------------
class Handed(Exception):
    """Raised by the stand-in deepspeed.initialize once it has recorded the config it was handed."""


def stand_in_deepspeed():
    """A stand-in for the deepspeed package: initialize() records config_params and stops."""
    handed = []

    def initialize(model=None, config_params=None, **kwargs):
        handed.append(copy.deepcopy(config_params))
        raise Handed

    package = types.ModuleType("deepspeed")
    package.initialize = initialize
    package.runtime = types.SimpleNamespace(lr_schedules=types.SimpleNamespace(VALID_LR_SCHEDULES=[]))
    return package, handed


class WithPlugin:
    """This Accelerator, seen by _prepare_deepspeed as one whose active DeepSpeed plugin is `ds`."""

    def __init__(self, ds):
        object.__setattr__(self, "deepspeed_plugin", ds)

    def __getattr__(self, name):
        return getattr(accelerator, name)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.config = types.SimpleNamespace(hidden_size=32)  # as a transformers model has
        self.layer = torch.nn.Linear(32, 32)


def config_handed_to_deepspeed(ds):
    """Run Accelerator._prepare_deepspeed(model, optimizer, train loader, eval loader) with plugin `ds`."""
    package, handed = stand_in_deepspeed()
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.utils.data.TensorDataset(torch.randn(96, 32))
    train = torch.utils.data.DataLoader(data, batch_size=8)
    evaluation = torch.utils.data.DataLoader(data, batch_size=12)
    # accelerator.py imports these names only when deepspeed is installed
    names = dict(DummyOptim=DummyOptim, DummyScheduler=DummyScheduler)
    with mock.patch.dict(sys.modules, {"deepspeed": package}), mock.patch.multiple(accelerate.accelerator, create=True, **names):
        try:
            Accelerator._prepare_deepspeed(WithPlugin(ds), model, optimizer, train, evaluation)
        except Handed:
            pass
    return handed[-1]


after = config_handed_to_deepspeed(plugin)
user_after = config_handed_to_deepspeed(user)

keys = ["train_micro_batch_size_per_gpu", "train_batch_size"]
_claims.equal(
    "plugin_leaves_batch_sizes_auto",
    measured=[before[k] for k in keys],
    control=[user_before["train_micro_batch_size_per_gpu"], user_before["train_batch_size"]],  # the user's 16
    expected=["auto", "auto"],
    plugin_config=before,
)
_claims.equal(
    "auto_values_filled_from_training_setup",
    # in the configs handed to deepspeed.initialize: the plugin's micro and train batch, and the user
    # config's "auto" gradient_clipping and reduce_bucket_size
    measured=[after[k] for k in keys]
    + [user_after["gradient_clipping"], user_after["zero_optimization"]["reduce_bucket_size"]],
    # the same four entries before _prepare_deepspeed ran (nothing filled yet: all "auto")
    control=[before[k] for k in keys]
    + [user_before["gradient_clipping"], user_before["zero_optimization"]["reduce_bucket_size"]],
    expected=[8, 8 * ACCUMULATION * world, 1.0, 32 * 32],  # min(8, 12); 8 x 4 x 2; 1.0; hidden_size ** 2
    filled_config=after,
    loader_batch_sizes=[8, 12],
    processes=world,
)
_claims.equal(
    "explicit_micro_batch_kept",
    measured=[user_after[k] for k in keys],
    control=[after[k] for k in keys],  # the plugin's "auto" micro batch, filled from the DataLoader
    expected=[16, 16 * ACCUMULATION * world],  # 16 kept although the DataLoader yields 8; 16 x 4 x 2
    user_config_after=user_after,
)
_claims.equal(
    "zero_stage_from_plugin_or_config",
    # the stage given nowhere: [the plugin's stage, the stage of the config it carries] with no argument;
    # [the plugin's stage, is_zero3()] for a user config whose stage is "auto"
    measured=[no_stage_given.zero_stage, no_stage_given.deepspeed_config["zero_optimization"]["stage"],
              config_stage_auto.zero_stage, config_stage_auto.hf_ds_config.is_zero3()],  # fmt: skip
    # the same with the stage given (the default not used): zero_stage=3 / a user config with stage 3
    control=[stage3_by_argument.zero_stage, stage3_by_argument.deepspeed_config["zero_optimization"]["stage"],
             user.zero_stage, user.hf_ds_config.is_zero3()],  # fmt: skip
    expected=[2, 2, 2, False],
    stage_given_nowhere=no_stage_given.zero_stage,
    auto_stage_in_config_becomes=config_stage_auto.deepspeed_config["zero_optimization"]["stage"],
    user_gradient_accumulation_steps=user_after["gradient_accumulation_steps"],
)
