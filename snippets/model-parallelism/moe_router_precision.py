# Why the Switch router runs in float32 ("selective precision", Fedus et al., arXiv:2101.03961, section 2.4),
# measured with transformers' SwitchTransformersTop1Router on bfloat16 hidden states (4,096 tokens, width
# 256, 64 experts, capacity large enough that no token is dropped, no jitter): which expert each token gets,
# against a float64 reference computed from the same bf16 inputs and router weights.
# 1. With router_dtype left at its default (float32), the argmax of the router's logits is the reference's
#    for every token; with router_dtype="bfloat16", near-ties round together and about 1% of tokens differ.
# 2. The router's own dispatch mask (expert_index) is the argmax of the probabilities after they are cast
#    back to the input dtype: in a bf16 model near-tied probabilities become equal and argmax takes the lower
#    index, so even the float32 router sends some tokens elsewhere than float64 would.
# Negative controls: router_dtype="bfloat16" (claim 1); the same router on the same values given as float32
# hidden states, where nothing is cast back to bf16 (claim 2).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/model-parallelism/moe_router_precision.py
import torch
from accelerate import Accelerator
from transformers import SwitchTransformersConfig
from transformers.models.switch_transformers import modeling_switch_transformers as switch

import _claims

TOKENS, WIDTH, EXPERTS = 4096, 256, 64
accelerator = Accelerator()
torch.manual_seed(0)
hidden = torch.randn(1, TOKENS, WIDTH).bfloat16()


def router(**config_kwargs):
    config = SwitchTransformersConfig(
        d_model=WIDTH, num_experts=EXPERTS, expert_capacity=TOKENS, router_jitter_noise=0.0, **config_kwargs
    )
    torch.manual_seed(1)  # the same router weights every time
    return switch.SwitchTransformersTop1Router(config).eval()


default_router = router()  # router_dtype left out: "float32"
weights = default_router.classifier.weight.detach().clone()
reference = (hidden[0].double() @ weights.double().T).argmax(-1)  # float64 from the same bf16 inputs
with torch.no_grad():
    dispatch, _, logits = default_router(hidden)
    bf16_dispatch, _, bf16_logits = router(router_dtype="bfloat16")(hidden)
    fp32_input_dispatch, _, _ = router()(hidden.float())  # same values, no cast back to bf16


def agreement(choice):
    return (choice == reference).float().mean().item()


_claims.at_least(
    "fp32_router_logits_pick_the_reference_expert",
    measured=agreement(logits[0].argmax(-1)),
    control=agreement(bf16_logits[0].argmax(-1)),  # router_dtype="bfloat16"
    bound=0.999,
    logits_dtype=str(logits.dtype),
    bf16_router_logits_dtype=str(bf16_logits.dtype),
)
_claims.at_least(
    "dispatch_decided_on_cast_probabilities",
    measured=1 - agreement(dispatch[0].argmax(-1)),  # tokens the float32 router dispatches elsewhere
    control=1 - agreement(fp32_input_dispatch[0].argmax(-1)),  # float32 hidden states: nothing cast to bf16
    bound=0.003,
    bf16_router_dispatch_disagreement=1 - agreement(bf16_dispatch[0].argmax(-1)),
)
