# Vocabulary-parallel cross-entropy (Megatron-LM, arXiv:1909.08053, section 3), as torch implements it in
# torch.distributed.tensor.parallel.loss_parallel, on 2 gloo ranks: the logits of 64 tokens over a
# vocabulary of 1,000 are sharded on the vocabulary dimension (DTensor Shard(1): 500 columns per rank),
# and F.cross_entropy under loss_parallel() computes the loss without gathering them. We compare it with
# the cross-entropy of the full logits in one process, and count what crosses ranks by wrapping
# torch.distributed._functional_collectives (which DTensor and loss_parallel call): elements all-reduced
# and all-gathered per token.
# Negative controls: the same loss_parallel program with the two all-reduces of its log-softmax (the
# cross-rank max and sum of exponentials) made identities, so each rank normalises over its own 500
# columns; the same loss computed after gathering the logits (DTensor.full_tensor()), for the traffic.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/model-parallelism/vocab_parallel_cross_entropy.py
import contextlib
from collections import Counter

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from accelerate import Accelerator
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor
from torch.distributed.tensor.parallel import loss as loss_module
from torch.distributed.tensor.parallel import loss_parallel

import _claims

TOKENS, VOCAB = 64, 1000
accelerator = Accelerator()
rank, world = accelerator.process_index, accelerator.num_processes
mesh = init_device_mesh("cpu", (world,))
torch.manual_seed(0)  # the same full logits and targets on every rank, to compare with
full_logits = torch.randn(TOKENS, VOCAB) * 3
target = torch.randint(0, VOCAB, (TOKENS,))


@contextlib.contextmanager
def counting(totals):
    """Elements passed to the functional all-reduce and all-gather (DTensor's collectives)."""
    originals = {name: getattr(funcol, name) for name in ("all_reduce", "all_gather_tensor", "all_gather_single")}

    def wrap(name):
        def counted(tensor, *args, **kwargs):
            totals[name] += tensor.numel()
            return originals[name](tensor, *args, **kwargs)

        return counted

    for name in originals:
        setattr(funcol, name, wrap(name))
    try:
        yield totals
    finally:
        for name, function in originals.items():
            setattr(funcol, name, function)


logits = distribute_tensor(full_logits.clone().requires_grad_(), mesh, [Shard(1)])
local = logits.to_local()
parallel_traffic = Counter()
with loss_parallel(), counting(parallel_traffic):
    loss = F.cross_entropy(logits, target)
    loss.backward()
parallel_loss = loss.full_tensor().item() if hasattr(loss, "full_tensor") else loss.item()

reference_logits = full_logits.clone().requires_grad_()
reference = F.cross_entropy(reference_logits, target)
reference.backward()
columns = slice(rank * (VOCAB // world), (rank + 1) * (VOCAB // world))
gradient_difference = (logits.grad.to_local() - reference_logits.grad[:, columns]).abs().max().item()



class WithoutLogSoftmaxReduction:
    """loss.py's view of the functional collectives with all_reduce an identity: only its log-softmax calls
    it (the max and the sum of exponentials); the target's masked reduce goes through DTensor, untouched."""

    def __getattr__(self, name):
        return getattr(funcol, name)

    @staticmethod
    def all_reduce(tensor, *args, **kwargs):
        return tensor


# Control 1: the same program without the cross-rank max and sum (each rank normalises over its shard)
loss_module.funcol = WithoutLogSoftmaxReduction()
try:
    with loss_parallel():
        unreduced = F.cross_entropy(distribute_tensor(full_logits.clone(), mesh, [Shard(1)]), target)
    unreduced_loss = unreduced.full_tensor().item() if hasattr(unreduced, "full_tensor") else unreduced.item()
finally:
    loss_module.funcol = funcol

# Control 2: gather the logits, then the ordinary loss
gathered_traffic = Counter()
with counting(gathered_traffic):
    gathered_loss = F.cross_entropy(distribute_tensor(full_logits, mesh, [Shard(1)]).full_tensor(), target)


def worst(value):
    value = torch.tensor([float(value)])
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return value.item()


_claims.at_most(
    "vocab_parallel_loss_equals_full",
    measured=worst(abs(parallel_loss - reference.item())),
    control=worst(abs(unreduced_loss - reference.item())),
    tolerance=1e-5,
    loss=parallel_loss,
    reference_loss=reference.item(),
    local_logits_shape=list(local.shape),
    full_logits_shape=list(full_logits.shape),
    gradient_max_difference=worst(gradient_difference),  # recorded, not judged
    gathered_loss=gathered_loss.item(),
    loss_without_log_softmax_reduction=unreduced_loss,
)
def gathered_elements(totals):
    return totals["all_gather_tensor"] + totals["all_gather_single"]


_claims.equal(
    "vocab_parallel_sends_scalars_per_token",
    # elements crossing ranks per token in the loss's forward and backward: [all-reduced, all-gathered]
    measured=[parallel_traffic["all_reduce"] / TOKENS, gathered_elements(parallel_traffic) / TOKENS],
    control=[gathered_traffic["all_reduce"] / TOKENS, gathered_elements(gathered_traffic) / TOKENS],
    expected=[3.0, 0.0],  # max, sum of exponentials, target logit; no logits gathered
    local_vocabulary_columns=local.shape[1],
)
