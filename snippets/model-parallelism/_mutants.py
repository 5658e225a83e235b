"""Mutants for model-parallelism: autograd behaving the way the handout's "each stage's result has an
error, the final result is biased" would need it to.

Imports of torch stay inside the functions: loading this catalogue costs nothing.
"""

from verify.mutation import mutant


@mutant(
    "backward-overwrites-grad",
    "backward() overwrites .grad instead of accumulating into it, so only the last micro-batch's gradient "
    "survives (the pipeline's result would then be biased towards one micro-batch)",
)
def backward_overwrites_grad(patch):
    import torch

    def leaves(tensor):
        """The leaf tensors (parameters) whose gradients this backward accumulates into."""
        seen, stack, found = set(), [tensor.grad_fn], []
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            if hasattr(node, "variable"):
                found.append(node.variable)
            stack.extend(next_node for next_node, _ in node.next_functions)
        return found

    def backward(original, self, *args, **kwargs):
        for leaf in leaves(self):
            leaf.grad = None  # forget what earlier backward passes accumulated
        return original(self, *args, **kwargs)

    patch.wrap(torch.Tensor, "backward", backward)


@mutant(
    "recv-does-not-wait",
    "torch.distributed.recv returns at once, before the sender's tensor has arrived (the buffer keeps what "
    "it held): a stage never waits for the previous one",
)
def recv_does_not_wait(patch):
    import torch.distributed as dist

    def no_wait(original, tensor, src=None, group=None, tag=0, group_src=None):
        work = dist.irecv(tensor, src=src, group=group, tag=tag)  # still posted, so the sender is not stuck
        _pending.append(work)  # never waited for before the tensor is used
        return src

    _pending = []
    patch.wrap(dist, "recv", no_wait)
