# DDP gradient buckets: DDP groups gradients into buckets of about `bucket_cap_mb`, fills them in the
# order the backward pass produces gradients (last layer first), and starts each bucket's all-reduce
# as soon as that bucket is full, while autograd is still working on the earlier layers.
# A comm hook records when each bucket is handed to the all-reduce; a tensor hook on every layer's
# output records when the backward pass reaches that layer.
# Negative controls: the default bucket_cap_mb (1 MiB first cap, 25 MiB after: one bucket here; nothing can
# start before the backward ends); the same layers applied in the opposite order (bucket 0 follows).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/data-parallelism/ddp_buckets_overlap_backward.py
import torch
from accelerate import Accelerator
from accelerate.utils import DistributedDataParallelKwargs
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

import _claims

LAYERS, WIDTH = 4, 256  # each Linear: 256*256 + 256 floats = 263,168 bytes, just over 0.25 MiB


class Stack(torch.nn.Module):
    """Four Linear layers; `order` says in which order forward applies them."""

    def __init__(self, order):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS))
        self.order, self.events = order, None

    def forward(self, x):
        for i in self.order:
            x = torch.tanh(self.layers[i](x))
            if x.requires_grad and self.events is not None:
                # fires when backward has the gradient of this layer's output, i.e. reaches layer i
                x.register_hook(lambda grad, i=i: self.events.append(("backward reaches layer", i)))
        return x


def run(bucket_cap_mb=None, order=tuple(range(LAYERS)), iterations=2):
    """Train `iterations` steps; return the events (buckets launched, layers reached) of each step."""
    handler = DistributedDataParallelKwargs(bucket_cap_mb=bucket_cap_mb) if bucket_cap_mb else None
    accelerator = Accelerator(kwargs_handlers=[handler] if handler else None)
    torch.manual_seed(0)
    model = accelerator.prepare(Stack(order))
    layer_of = {p.data_ptr(): i for i, layer in enumerate(model.module.layers) for p in layer.parameters()}

    def recording_hook(state, bucket):  # DDP calls this the moment a bucket is full
        layers = sorted({layer_of[p.data_ptr()] for p in bucket.parameters()})
        model.module.events.append(("bucket all-reduce starts", bucket.index(), layers))
        return allreduce_hook(state, bucket)  # torch's reference hook: divide by world size, all-reduce

    model.register_comm_hook(state=None, hook=recording_hook)
    steps = []
    for _ in range(iterations):
        model.module.events = []
        model(torch.randn(8, WIDTH)).sum().backward()  # buckets are rebuilt after iteration 1
        steps.append(model.module.events)
    return steps


def buckets(events):
    return [event for event in events if event[0] == "bucket all-reduce starts"]


def started_before_first_layer(events):
    """How many bucket all-reduces started before the backward pass reached layer 0 (applied first)."""
    position = events.index(("backward reaches layer", 0))
    return len(buckets(events[:position]))


small = run(bucket_cap_mb=0.25)  # about one Linear per bucket
half_mb = run(bucket_cap_mb=0.5)
default = run()  # bucket_cap_mb unset: first bucket 1 MiB, later ones 25 MiB
reversed_model = run(bucket_cap_mb=0.25, order=tuple(reversed(range(LAYERS))))

_claims.equal(
    "bucket_count_follows_bucket_cap_mb",
    measured=len(buckets(small[1])),
    control=len(buckets(default[1])),
    expected=LAYERS,  # one bucket per 0.25 MiB layer
    buckets_at_half_mb=len(buckets(half_mb[1])),
    buckets_in_first_iteration_at_quarter_mb=len(buckets(small[0])),
    bucket_layers_at_quarter_mb=[bucket[2] for bucket in buckets(small[1])],
)
_claims.at_least(
    "allreduce_starts_during_backward",
    measured=started_before_first_layer(small[1]),
    control=started_before_first_layer(default[1]),
    bound=2,
    events_at_quarter_mb=[list(map(str, event)) for event in small[1]],
    events_default=[list(map(str, event)) for event in default[1]],
)
_claims.equal(
    "first_bucket_holds_last_layer_used",
    measured=buckets(small[1])[0][2][0],  # the layer whose parameters bucket 0 holds
    control=buckets(reversed_model[1])[0][2][0],
    expected=LAYERS - 1,  # the last layer forward applies, the first whose gradients are ready
    first_bucket_launched_index=buckets(small[1])[0][1],
)
