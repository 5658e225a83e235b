"""Excerpts of Accelerate's documentation, copied byte for byte from its sources at two refs.

Written by `python tests/test_doc_excerpts.py` (from a git mirror of the repository).

The proofs on the page about errata of Accelerate's docs run these texts (exec, compile, json.loads) so that
the page can cite file and line. Each excerpt is lines [first, last] (1-based, inclusive) of `path` in
huggingface/accelerate at the tag v1.14.0 and on main at MAIN_COMMIT (1.15.0.dev0, 2026-07-24), the newest
snapshot of the repository that could be fetched here: the tag v1.15.0 is not in it. tests/test_doc_excerpts.py
compares every excerpt with both refs when a mirror of the repository is present.
"""

REPOSITORY = "huggingface/accelerate"
MAIN_COMMIT = "16cb6eb80dd9aa8b4df1a63ef57863e455d53b83"
TAG = "v1.14.0"

EXCERPTS = {'ga_automagic_tip': {'path': 'docs/source/usage_guides/gradient_accumulation.md',
                      'text': '\n'
                              'Typically with gradient accumulation, you would need to adjust the number of '
                              'steps to reflect the change in total batches you are \n'
                              'training on. Accelerate automagically does this for you by default. Behind '
                              'the scenes we instantiate a [`GradientAccumulationPlugin`] configured to do '
                              'this.',
                      'main': [121, 123],
                      'v1.14.0': [121, 123]},
 'ga_full_example': {'path': 'docs/source/usage_guides/gradient_accumulation.md',
                     'text': 'import torch\n'
                             'import copy\n'
                             'from accelerate import Accelerator\n'
                             'from accelerate.utils import set_seed\n'
                             'from accelerate.logging import  get_logger\n'
                             'from torch.utils.data import Dataset, DataLoader\n'
                             'import math\n'
                             'import contexlib\n'
                             '\n'
                             '# seed\n'
                             'set_seed(0)\n'
                             'logger = get_logger(__name__)\n'
                             '\n'
                             'class MyDataset(Dataset):\n'
                             '    def __init__(self, num_samples):\n'
                             '        super().__init__()\n'
                             '        self.len = num_samples\n'
                             '\n'
                             '    def __getitem__(self, index):\n'
                             '        input_ids = torch.arange(1, index+2, dtype=torch.float32)\n'
                             '        labels = torch.remainder(input_ids, 2)\n'
                             '        return {"input_ids": input_ids, "labels": labels}\n'
                             '\n'
                             '    def __len__(self):\n'
                             '        return self.len\n'
                             '    \n'
                             'def collate_fn(features):\n'
                             '    input_ids = torch.nn.utils.rnn.pad_sequence([f["input_ids"] for f in '
                             'features], batch_first=True, padding_value=-100)\n'
                             '    labels = torch.nn.utils.rnn.pad_sequence([f["labels"] for f in features], '
                             'batch_first=True, padding_value=-100)\n'
                             '    return {"input_ids": input_ids[..., None], "labels": labels[..., None]}\n'
                             '\n'
                             '# define toy inputs and labels\n'
                             'gradient_accumulation_steps = 2\n'
                             'per_device_batch_size = 4\n'
                             '\n'
                             '# define accelerator\n'
                             'accelerator = '
                             'Accelerator(gradient_accumulation_steps=gradient_accumulation_steps)\n'
                             '\n'
                             '# define dataset and dataloader\n'
                             "# for this toy example, we'll compute gradient descent over one single global "
                             'batch\n'
                             'dataset = '
                             'MyDataset(per_device_batch_size*gradient_accumulation_steps*accelerator.num_processes)\n'
                             'dataloader = DataLoader(dataset, batch_size=per_device_batch_size, '
                             'collate_fn=collate_fn)\n'
                             '\n'
                             '# define model, model_optimizer and loss function\n'
                             'model = torch.nn.Linear(1, 2, bias=False)\n'
                             'model_clone = copy.deepcopy(model)\n'
                             'criterion = torch.nn.CrossEntropyLoss(reduction="sum") # must sum over samples '
                             'rather than averaging\n'
                             'model_optimizer = torch.optim.SGD(model.parameters(), lr=0.08)\n'
                             '\n'
                             '\n'
                             'logger.warning(f"initial model weight is '
                             '{model.weight.detach().cpu().squeeze()}")\n'
                             'logger.warning(f"initial model clone weight is '
                             '{model_clone.weight.detach().cpu().squeeze()}")\n'
                             '\n'
                             '# prepare artifacts - accelerator handles device placement and dataloader '
                             'splitting\n'
                             'model, model_optimizer = accelerator.prepare(model, model_optimizer)\n'
                             'dataloader = accelerator.prepare_data_loader(dataloader, '
                             'device_placement=True)\n'
                             'training_iterator = iter(dataloader)\n'
                             '\n'
                             'num_samples_in_epoch = len(dataloader)\n'
                             'remainder = num_samples_in_epoch % gradient_accumulation_steps\n'
                             'remainder = remainder if remainder != 0 else gradient_accumulation_steps\n'
                             'total_gradient_updates = math.ceil(num_samples_in_epoch / '
                             'gradient_accumulation_steps)\n'
                             '\n'
                             'total_batched_samples = 0\n'
                             'for update_step in range(total_gradient_updates):\n'
                             '        # In order to correctly the total number of non-padded tokens on which '
                             "we'll compute the cross-entropy loss\n"
                             '        # we need to pre-load the full local batch - i.e the next '
                             'per_device_batch_size * accumulation_steps samples\n'
                             '        batch_samples = []\n'
                             '        num_batches_in_step = gradient_accumulation_steps if update_step != '
                             '(total_gradient_updates - 1) else remainder\n'
                             '        for _ in range(num_batches_in_step):\n'
                             '            batch_samples += [next(training_iterator)]\n'
                             '            \n'
                             '        # get local num items in batch \n'
                             '        local_num_items_in_batch = sum([(batch["labels"].ne(-100)).sum() for '
                             'batch in batch_samples])\n'
                             '        logger.warning(f"Step {update_step} - Device '
                             '{accelerator.process_index} - num items in the local batch '
                             '{local_num_items_in_batch}", main_process_only=False)\n'
                             '\n'
                             '        # to compute it correctly in a multi-device DDP training, we need to '
                             'gather the total number of items in the full batch.\n'
                             '        num_items_in_batch = '
                             'accelerator.gather(local_num_items_in_batch).sum().item()\n'
                             '        logger.warning(f"Total num items {num_items_in_batch}")\n'
                             '\n'
                             '        for i, batch in enumerate(batch_samples):\n'
                             '            inputs, labels = batch["input_ids"], batch["labels"]\n'
                             '            total_batched_samples += 1\n'
                             '            # if we perform gradient accumulation in a multi-devices set-up, '
                             'we want to avoid unnecessary communications when accumulating\n'
                             '            # cf: https://muellerzr.github.io/blog/gradient_accumulation.html\n'
                             '            if (i < len(batch_samples) - 1 and accelerator.num_processes > '
                             '1):\n'
                             '                ctx = model.no_sync\n'
                             '            else:\n'
                             '                ctx = contextlib.nullcontext\n'
                             '            with ctx():\n'
                             '\n'
                             '                outputs = model(inputs)\n'
                             '                loss = criterion(outputs.view(-1, 2), '
                             'labels.view(-1).to(torch.int64))\n'
                             '                \n'
                             '                # We multiply by num_processes because the DDP calculates the '
                             'average gradient across all devices whereas dividing by num_items_in_batch '
                             'already takes into account all devices\n'
                             '                # Same reason for gradient_accumulation_steps, but this times '
                             "it's Accelerate that calculate the average gradient across the accumulated "
                             'steps \n'
                             '                loss = (loss * gradient_accumulation_steps * '
                             'accelerator.num_processes) / num_items_in_batch\n'
                             '                accelerator.backward(loss)\n'
                             '        model_optimizer.step()\n'
                             '        model_optimizer.zero_grad()\n'
                             '                \n'
                             '\n'
                             'logger.warning(f"Device {accelerator.process_index} - w/ accumulation, the '
                             'final model weight is '
                             '{accelerator.unwrap_model(model).weight.detach().cpu().squeeze()}", '
                             'main_process_only=False)\n'
                             '\n'
                             '# We know do the same operation but on a single device and without gradient '
                             'accumulation\n'
                             '\n'
                             'if accelerator.is_main_process:\n'
                             '    # prepare one single entire batch\n'
                             '    dataloader = DataLoader(dataset, batch_size=len(dataset), '
                             'collate_fn=collate_fn)\n'
                             '    full_batch_without_accum = next(iter(dataloader))\n'
                             '    total_inputs, total_labels = full_batch_without_accum["input_ids"], '
                             'full_batch_without_accum["labels"]\n'
                             '    model_clone_optimizer = torch.optim.SGD(model_clone.parameters(), '
                             'lr=0.08)\n'
                             '    \n'
                             '    # train the cloned model\n'
                             '    loss = '
                             'torch.nn.CrossEntropyLoss(reduction="mean")(model_clone(total_inputs).view(-1, '
                             '2), total_labels.view(-1).to(torch.int64))\n'
                             '    model_clone_optimizer.zero_grad()\n'
                             '    loss.backward()\n'
                             '    model_clone_optimizer.step()\n'
                             '    \n'
                             '    # We should have the same final weights.\n'
                             '    logger.warning(f"w/o accumulation, the final model weight is '
                             '{model_clone.weight.detach().cpu().squeeze()}")\n',
                     'main': [314, 435],
                     'v1.14.0': [314, 435]},
 'launch_torchrun': {'path': 'docs/source/basic_tutorials/launch.md',
                     'text': 'MIXED_PRECISION="fp16" torchrun --nproc_per_node=2 --nnodes=1 {script_name.py} '
                             '{--arg1} {--arg2} ...',
                     'main': [142, 142],
                     'v1.14.0': [142, 142]},
 'checkpoint_naming_text': {'path': 'docs/source/usage_guides/checkpoint.md',
                            'text': 'To further customize where and how states are saved through '
                                    '[`~Accelerator.save_state`] the [`~utils.ProjectConfiguration`] class '
                                    'can be used. For example \n'
                                    'if `automatic_checkpoint_naming` is enabled each saved checkpoint will '
                                    'be located then at '
                                    '`Accelerator.project_dir/checkpoints/checkpoint_{checkpoint_number}`.',
                            'main': [23, 24],
                            'v1.14.0': [23, 24]},
 'checkpoint_example': {'path': 'docs/source/usage_guides/checkpoint.md',
                        'text': 'from accelerate import Accelerator\n'
                                'import torch\n'
                                '\n'
                                'accelerator = Accelerator(project_dir="my/save/path")\n'
                                '\n'
                                'my_scheduler = torch.optim.lr_scheduler.StepLR(my_optimizer, step_size=1, '
                                'gamma=0.99)\n'
                                'my_model, my_optimizer, my_training_dataloader = '
                                'accelerator.prepare(my_model, my_optimizer, my_training_dataloader)\n'
                                '\n'
                                '# Register the LR scheduler\n'
                                'accelerator.register_for_checkpointing(my_scheduler)\n'
                                '\n'
                                '# Save the starting state\n'
                                'accelerator.save_state()\n'
                                '\n'
                                'device = accelerator.device\n'
                                'my_model.to(device)\n'
                                '\n'
                                '# Perform training\n'
                                'for epoch in range(num_epochs):\n'
                                '    for batch in my_training_dataloader:\n'
                                '        my_optimizer.zero_grad()\n'
                                '        inputs, targets = batch\n'
                                '        inputs = inputs.to(device)\n'
                                '        targets = targets.to(device)\n'
                                '        outputs = my_model(inputs)\n'
                                '        loss = my_loss_function(outputs, targets)\n'
                                '        accelerator.backward(loss)\n'
                                '        my_optimizer.step()\n'
                                '    my_scheduler.step()\n'
                                '\n'
                                '# Restore the previous state\n'
                                'accelerator.load_state("my/save/path/checkpointing/checkpoint_0")',
                        'main': [35, 66],
                        'v1.14.0': [35, 66]},
 'migration_save': {'path': 'docs/source/basic_tutorials/migration.md',
                    'text': 'accelerator.wait_for_everyone()\naccelerator.save_model(model, save_directory)',
                    'main': [165, 166],
                    'v1.14.0': [165, 166]},
 'migration_load': {'path': 'docs/source/basic_tutorials/migration.md',
                    'text': 'unwrapped_model = accelerator.unwrap_model(model)\n'
                            'path_to_checkpoint = os.path.join(save_directory,"pytorch_model.bin")\n'
                            'unwrapped_model.load_state_dict(torch.load(path_to_checkpoint))',
                    'main': [191, 193],
                    'v1.14.0': [191, 193]},
 'migration_safetensors_optin': {'path': 'docs/source/basic_tutorials/migration.md',
                                 'text': 'Set `safe_serialization=True` to save the model in the safetensor '
                                         'format.',
                                 'main': [199, 199],
                                 'v1.14.0': [199, 199]},
 'sp_diff': {'path': 'docs/source/concept_guides/sequence_parallelism.md',
             'text': 'from accelerate.utils import ParallelismConfig, DeepSpeedSequenceParallelConfig\n'
                     '\n'
                     '+# Example: 4 GPUs with sp_size=4, dp_shard_size=1\n'
                     '+# Ensure: dp_replicate_size × dp_shard_size × sp_size = 1 × 1 × 4 = 4 GPUs\n'
                     'parallelism_config = ParallelismConfig(\n'
                     '+     sp_backend="deepspeed",\n'
                     '+     sp_size=4,\n'
                     '+     dp_shard_size=1,  # Explicit: no data parallelism\n'
                     '+     sp_handler=DeepSpeedSequenceParallelConfig(\n'
                     '+         sp_seq_length_is_variable: true,\n'
                     '+         sp_attn_implementation="sdpa",\n'
                     '+     ),\n'
                     '+ )\n'
                     '\n'
                     'accelerator = Accelerator(\n'
                     '    ...,\n'
                     '    parallelism_config=parallelism_config,\n'
                     ')',
             'main': [51, 68],
             'v1.14.0': [51, 68]},
 'ds_plugins': {'path': 'docs/source/usage_guides/deepspeed_multiple_model.md',
                'text': 'from accelerate.utils import DeepSpeedPlugin\n'
                        '\n'
                        'zero2_plugin = DeepSpeedPlugin(hf_ds_config="zero2_config.json")\n'
                        'zero3_plugin = DeepSpeedPlugin(hf_ds_config="zero3_config.json")\n'
                        '\n'
                        'deepspeed_plugins = {"student": zero2_plugin, "teacher": zero3_plugin}',
                'main': [44, 49],
                'v1.14.0': [44, 49]},
 'ds_zero3_json': {'path': 'docs/source/usage_guides/deepspeed_multiple_model.md',
                   'text': '{\n'
                           '    "bf16": {\n'
                           '        "enabled": "auto"\n'
                           '    },\n'
                           '    "zero_optimization": {\n'
                           '        "stage": 3,\n'
                           '        "overlap_comm": true,\n'
                           '        "reduce_bucket_size": "auto",\n'
                           '        "stage3_prefetch_bucket_size": "auto",\n'
                           '        "stage3_param_persistence_threshold": "auto",\n'
                           '        "stage3_max_live_parameters": "auto",\n'
                           '        "stage3_max_reuse_distance": "auto",\n'
                           '    },\n'
                           '    "train_micro_batch_size_per_gpu": 1\n'
                           '}',
                   'main': [55, 69],
                   'v1.14.0': [55, 69]},
 'ds_zero2_json': {'path': 'docs/source/usage_guides/deepspeed_multiple_model.md',
                   'text': '{\n'
                           '    "bf16": {\n'
                           '        "enabled": "auto"\n'
                           '    },\n'
                           '    "optimizer": {\n'
                           '        "type": "AdamW",\n'
                           '        "params": {\n'
                           '            "lr": "auto",\n'
                           '            "weight_decay": "auto",\n'
                           '            "torch_adam": true,\n'
                           '            "adam_w_mode": true\n'
                           '        }\n'
                           '    },\n'
                           '    "scheduler": {\n'
                           '        "type": "WarmupLR",\n'
                           '        "params": {\n'
                           '            "warmup_min_lr": "auto",\n'
                           '            "warmup_max_lr": "auto",\n'
                           '            "warmup_num_steps": "auto"\n'
                           '        }\n'
                           '    },\n'
                           '    "zero_optimization": {\n'
                           '        "stage": 2,\n'
                           '        "offload_optimizer": {\n'
                           '            "device": "cpu",\n'
                           '            "pin_memory": true\n'
                           '        },\n'
                           '    },\n'
                           '    "gradient_accumulation_steps": 1,\n'
                           '    "gradient_clipping": "auto",\n'
                           '    "train_batch_size": "auto",\n'
                           '    "train_micro_batch_size_per_gpu": "auto",\n'
                           '}',
                   'main': [75, 107],
                   'v1.14.0': [75, 107]},
 'ds_active_plugin': {'path': 'docs/source/usage_guides/deepspeed_multiple_model.md',
                      'text': 'active_plugin = get_active_deepspeed_plugin(accelerator.state)\n'
                              'assert active_plugin is deepspeed_plugins["student"]',
                      'main': [131, 132],
                      'v1.14.0': [131, 132]},
 'tracker_class': {'path': 'docs/source/usage_guides/tracking.md',
                   'text': 'from accelerate.tracking import GeneralTracker, on_main_process\n'
                           'from typing import Optional\n'
                           '\n'
                           'import wandb\n'
                           '\n'
                           '\n'
                           'class MyCustomTracker(GeneralTracker):\n'
                           '    name = "wandb"\n'
                           '    requires_logging_directory = False\n'
                           '\n'
                           '    @on_main_process\n'
                           '    def __init__(self, run_name: str):\n'
                           '        self.run_name = run_name\n'
                           '        run = wandb.init(self.run_name)\n'
                           '\n'
                           '    @property\n'
                           '    def tracker(self):\n'
                           '        return self.run.run\n'
                           '\n'
                           '    @on_main_process\n'
                           '    def store_init_configuration(self, values: dict):\n'
                           '        wandb.config(values)\n'
                           '\n'
                           '    @on_main_process\n'
                           '    def log(self, values: dict, step: Optional[int] = None):\n'
                           '        wandb.log(values, step=step)',
                   'main': [130, 155],
                   'v1.14.0': [130, 155]},
 'tracker_neptune': {'path': 'docs/source/usage_guides/tracking.md',
                     'text': '  from accelerate import Accelerator\n'
                             '+ import neptune\n'
                             '\n'
                             '  accelerator = Accelerator()\n'
                             '+ run = neptune.init_run(...)\n'
                             '\n'
                             '  my_model, my_optimizer, my_training_dataloader = '
                             'accelerate.prepare(my_model, my_optimizer, my_training_dataloader)\n'
                             '  device = accelerator.device\n'
                             '  my_model.to(device)\n'
                             '\n'
                             '  for iteration in config["num_iterations"]:\n'
                             '      for batch in my_training_dataloader:\n'
                             '          my_optimizer.zero_grad()\n'
                             '          inputs, targets = batch\n'
                             '          inputs = inputs.to(device)\n'
                             '          targets = targets.to(device)\n'
                             '          outputs = my_model(inputs)\n'
                             '          loss = my_loss_function(outputs, targets)\n'
                             '          total_loss += loss\n'
                             '          accelerator.backward(loss)\n'
                             '          my_optimizer.step()\n'
                             '+         if accelerator.is_main_process:\n'
                             '+             run["logs/training/batch/loss"].log(loss)',
                     'main': [230, 252],
                     'v1.14.0': [211, 233]},
 'bmi_generate': {'path': 'docs/source/concept_guides/big_model_inference.md',
                  'text': 'from mingpt.bpe import BPETokenizer\n'
                          'tokenizer = BPETokenizer()\n'
                          'inputs = tokenizer("Hello, my name is").to(0)\n'
                          '\n'
                          'outputs = model.generate(x1, max_new_tokens=10, do_sample=False)[0]\n'
                          'tokenizer.decode(outputs.cpu().squeeze())',
                  'main': [205, 210],
                  'v1.14.0': [205, 210]},
 'bmi_offload_hook': {'path': 'docs/source/concept_guides/big_model_inference.md',
                      'text': 'model_1, hook_1 = cpu_offload_with_hook(model_1, execution_device)\n'
                              'model_2, hook_2 = cpu_offload_with_hook(model_2, execution_device, '
                              'prev_module_hook=hook_1)\n'
                              'model_3, hook_3 = cpu_offload_with_hook(model_3, execution_device, '
                              'prev_module_hook=hook_2)\n'
                              '\n'
                              'hid_1 = model_1(input)\n'
                              'for i in range(50):\n'
                              '    # model1 is offloaded on the CPU at the first iteration, model 2 stays on '
                              'the GPU for this whole loop.\n'
                              '    hid_2 = model_2(hid_1)\n'
                              '# model2 is offloaded to the CPU just before this forward.\n'
                              'hid_3 = model_3(hid_3)\n'
                              '\n'
                              '# For model3, you need to manually call the hook offload method.\n'
                              'hook_3.offload()',
                      'main': [309, 321],
                      'v1.14.0': [309, 321]},
 'exec_local_process': {'path': 'docs/source/basic_tutorials/execution.md',
                        'text': 'Use the [`~Accelerator.on_local_process`] method and specify the local '
                                'process index to execute a function on.\n'
                                '\n'
                                '```py\n'
                                '@accelerator.on_local_process(local_process_idx=0)\n'
                                'def do_my_thing():\n'
                                '    "Something done on process index 0 on each server"\n'
                                '    do_thing_on_index_zero_on_each_server()\n'
                                '```',
                        'main': [108, 115],
                        'v1.14.0': [108, 115]},
 'tpu_downcast': {'path': 'docs/source/concept_guides/training_tpu.md',
                  'text': 'This is performed in the `Accelerator` object when passing `downcast_bf16=True`:\n'
                          '```python\n'
                          'accelerator = Accelerator(mixed_precision="bf16", downcast_bf16=True)\n'
                          '```',
                  'main': [146, 149],
                  'v1.14.0': [146, 149]},
 'lp_te': {'path': 'docs/source/usage_guides/low_precision_training.md',
           'text': '```{python}\n'
                   'from accelerate import Accelerator\n'
                   'from accelerate.utils import TERecipeKwargs, AORecipeKwargs\n'
                   '# Use TransformersEngine\n'
                   'kwargs = [TERecipeKwargs()]\n'
                   '# Or to use torchao\n'
                   '# kwargs = [AORecipeKwargs()]\n'
                   'accelerator = Accelerator(mixed_precision="fp8", kwarg_handlers=kwargs)\n'
                   '```',
           'main': [44, 52],
           'v1.14.0': [44, 52]},
 'lp_msamp': {'path': 'docs/source/usage_guides/low_precision_training.md',
              'text': 'To specify an optimization level, pass it to the `FP8KwargsHandler` by setting the '
                      '`optimization_level` argument:\n'
                      '\n'
                      '```{python}\n'
                      'from accelerate import Accelerator\n'
                      'from accelerate.utils import FP8RecipeKwargs\n'
                      'kwargs = [FP8RecipeKwargs(backend="msamp", optimization_level="O2")]\n'
                      'accelerator = Accelerator(mixed_precision="fp8", kwarg_handlers=kwargs)\n'
                      '```',
              'main': [90, 97],
              'v1.14.0': [90, 97]},
 'lp_te_backend': {'path': 'docs/source/usage_guides/low_precision_training.md',
                   'text': '```{python}\n'
                           'from accelerate import Accelerator\n'
                           'from accelerate.utils import FP8RecipeKwargs\n'
                           'kwargs = [FP8RecipeKwargs(backend="te", ...)]\n'
                           'accelerator = Accelerator(mixed_precision="fp8", kwarg_handlers=kwargs)\n'
                           '```',
                   'main': [118, 123],
                   'v1.14.0': [118, 123]},
 'lp_ao': {'path': 'docs/source/usage_guides/low_precision_training.md',
           'text': '```{python}\n'
                   'from accelerate import Accelerator\n'
                   'from accelerate.utils import AORecipeKwargs, TorchDynamoPlugin, '
                   'FullyShardedDataParallelPlugin\n'
                   'from torchao.float8 import Float8LinearConfig\n'
                   '\n'
                   'fsdp2_plugin = FullyShardedDataParallelPlugin(\n'
                   '  fsdp_version=2,\n'
                   '  cpu_ram_efficient_loading=False, # CPU RAM efficient loading CANNOT work with fp8 '
                   'torchao\n'
                   '  fsdp_auto_wrap_policy="TRANSFORMER_BASED_WRAP",\n'
                   ')\n'
                   'dynamo_plugin = TorchDynamoPlugin(\n'
                   '  backend="inductor",\n'
                   '  use_regional_compilation=True,\n'
                   ')\n'
                   'fp8_config = Float8LinearConfig(\n'
                   '  enable_fsdp_float8_all_gather=True, # Use FP8 all_gather in FSDP2\n'
                   '  pad_inner_dim=True,\n'
                   ')\n'
                   'kwargs = [AORecipeKwargs(\n'
                   '  config=fp8_config\n'
                   ')]\n'
                   'accelerator = Accelerator(\n'
                   '  mixed_precision="fp8",\n'
                   '  fsdp_plugin=fsdp2_plugin,\n'
                   '  dynamo_plugin=dynamo_plugin,\n'
                   '  kwarg_handlers=kwargs,\n'
                   ')\n'
                   '```',
           'main': [148, 175],
           'v1.14.0': [148, 175]}}
