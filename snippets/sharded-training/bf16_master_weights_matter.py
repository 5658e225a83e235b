# Why "FSDP needs a larger learning rate than DeepSpeed" (accelerate issue #2624) was about precision:
# DeepSpeed keeps fp32 master weights for the optimizer even when the model is loaded in bf16; FSDP
# shards whatever dtype it is given. A bf16 model sharded as is takes Adam steps IN bf16, and an update
# of 1e-4 is below half a bf16 step for most weights: they do not move. Accelerate now upcasts to fp32
# when mixed precision is on (accelerate/utils/fsdp_utils.py, fsdp2_prepare_model) and lets
# MixedPrecisionPolicy cast to bf16 for compute, which is what we do here with torch's fully_shard.
# Negative control: the same bf16 model sharded without the upcast.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/sharded-training/bf16_master_weights_matter.py
import copy

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

import _claims

accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
mesh = init_device_mesh("cpu", (world,))
set_seed(0)
loaded = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1)).to(torch.bfloat16)
x, y = torch.randn(16, 64), torch.randn(16, 1)


def fraction_moved(upcast):
    net = copy.deepcopy(loaded)
    if upcast:
        net = net.float()  # fp32 master copy (DeepSpeed's way; Accelerate's FSDP upcast)
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    else:
        policy = MixedPrecisionPolicy()  # shard the bf16 weights as they are
    for layer in (net[0], net[2]):
        fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(net, mesh=mesh, mp_policy=policy)
    before = [p.detach().to_local().float().clone() for p in net.parameters()]
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-4)
    out = net(x[rank::world].to(torch.bfloat16))
    torch.nn.functional.mse_loss(out.float(), y[rank::world]).backward()
    optimizer.step()
    after = [p.detach().to_local().float() for p in net.parameters()]
    changed = torch.cat([(a != b).flatten() for a, b in zip(after, before)])
    old = torch.cat([b.flatten() for b in before])
    zero_grad = torch.cat([(p.grad.to_local() == 0).flatten() for p in net.parameters()])
    why = dict(
        dtype=str(next(net.parameters()).dtype),
        unmoved=int((~changed).sum()),
        unmoved_with_zero_gradient=int((~changed & zero_grad).sum()),
        largest_moved_weight=old[changed].abs().max().item(),
        share_below_2_to_minus_5=(old.abs() < 2**-5).float().mean().item(),  # bf16 spacing <= 1.2e-4 there
    )
    return changed.float().mean().item(), why


moved_fp32, why_fp32 = fraction_moved(upcast=True)
moved_bf16, why_bf16 = fraction_moved(upcast=False)
_claims.at_least(
    "fp32_master_weights_take_small_steps",
    measured=moved_fp32,  # share of this rank's weights changed by one Adam step at lr 1e-4
    control=moved_bf16,  # sharded bf16 weights: the step rounds away for most of them
    bound=0.99,
    model_elements=sum(p.numel() for p in loaded.parameters()),
    fp32_masters=why_fp32,
    bf16_as_loaded=why_bf16,
)
