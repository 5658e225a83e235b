# Which communication backend runs, and who picks it. Accelerate picks in PartialState._prepare_backend
# (accelerate/state.py): gloo for CPU processes (ACCELERATE_USE_CPU / cpu=True), nccl when CUDA is
# there, nothing at all when neither. torch picks per device type: Backend.default_device_backend_map
# and BackendConfig (torch/distributed/distributed_c10d.py) say which backend carries tensors of which
# device, and an "nccl" group has no backend for CPU tensors.
# Accelerate passes PartialState only the InitProcessGroupKwargs fields you changed, so the handler's
# default backend "nccl" never reaches it.
# Negative controls: the same selection with cpu=False (no GPU here: no backend, DistributedType.NO);
# the same device map for "gloo"; the same tensor without the all-reduce; the same PartialState given
# every field of InitProcessGroupKwargs() (backend "nccl" included).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/launching/backend_choice.py
import torch
import torch.distributed as dist
from accelerate import Accelerator, PartialState
from accelerate.utils import InitProcessGroupKwargs
from torch.distributed.distributed_c10d import Backend, BackendConfig

import _claims

accelerator = Accelerator()  # the harness exports ACCELERATE_USE_CPU=true: MULTI_CPU on gloo


def choice(cpu):
    """Accelerate's own selection function, asked with and without the CPU flag (it only decides)."""
    backend, distributed_type = PartialState()._prepare_backend(cpu=cpu)  # the shared state's method
    return [backend, str(distributed_type).split(".")[-1]]


_claims.equal(
    "accelerate_picks_gloo_for_cpu_processes",
    measured=choice(cpu=True),
    control=choice(cpu=False),  # what a plain Accelerator() gets without ACCELERATE_USE_CPU
    expected=["gloo", "MULTI_CPU"],
    backend_this_run=dist.get_backend(),  # the group the launch really built
    cuda_available=torch.cuda.is_available(),
    nccl_in_this_torch=dist.is_nccl_available(),
    mpi_in_this_torch=dist.is_mpi_available(),
)


# --- torch: which backend serves which device ---------------------------------------------------------
def devices_served(backend):
    """The device types a process group created with this backend string can move tensors of."""
    return sorted(BackendConfig(Backend(backend)).get_device_backend_map())


_claims.equal(
    "nccl_group_has_no_cpu_backend",
    measured=devices_served("nccl"),
    control=devices_served("gloo"),
    expected=["cuda"],
    mixed=devices_served("cpu:gloo,cuda:nccl"),  # what Accelerate asks for under FSDP with CPU offload
    default_for_cpu=dist.get_default_backend_for_device("cpu"),
    default_for_cuda=dist.get_default_backend_for_device("cuda"),
)

# --- gloo really carries CPU tensors: a gloo group, whatever backend the default group has -------------
gloo = dist.new_group(backend="gloo")  # every rank creates it, in the same order
value = torch.tensor([float(accelerator.process_index + 1)])  # rank 0 holds 1, rank 1 holds 2
local = value.clone()
dist.all_reduce(value, group=gloo)
_claims.equal(
    "gloo_allreduces_cpu_tensors",
    measured=value.item(),
    control=local.item(),  # the same tensor without the all-reduce
    expected=float(sum(range(1, accelerator.num_processes + 1))),
    device=str(value.device),
)
dist.destroy_process_group(gloo)  # only the subgroup; the default group stays

# --- InitProcessGroupKwargs(): its backend field reads "nccl", but what reaches PartialState? -----------
# Accelerator.__init__ hands PartialState `self.init_handler.to_kwargs()`. Ask PartialState afresh (its
# shared state saved and put back; the process group already exists, so nothing is re-created) which
# backend it settles on in CPU mode, given that dict, and given every field of the handler instead.


def backend_chosen_with(kwargs):
    saved = dict(PartialState._shared_state)
    PartialState._reset_state()
    try:
        return PartialState(cpu=True, **kwargs).backend
    except ValueError as error:  # an assigned backend that the CPU path cannot use
        return f"ValueError: {error}"
    finally:
        PartialState._shared_state.clear()
        PartialState._shared_state.update(saved)


handler = InitProcessGroupKwargs()
_claims.equal(
    "init_kwargs_default_backend_is_not_passed",
    measured=backend_chosen_with(handler.to_kwargs()),
    control=backend_chosen_with(handler.to_dict()),  # every field, its default backend "nccl" included
    expected="gloo",
    handler_backend_field=handler.backend,
    passed_kwargs=sorted(handler.to_kwargs()),
)
