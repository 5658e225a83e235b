# The Switch Transformer auxiliary load-balancing loss (Fedus et al., arXiv:2101.03961, section 2.2),
# alpha * N * sum_i f_i * P_i, as transformers implements it (load_balancing_loss_func in
# models/switch_transformers): f_i the fraction of tokens routed (top-1) to expert i, P_i the mean router
# probability of expert i. Measured first on fixed routings: 1.0 when tokens and probabilities are spread
# evenly over the N experts, N when every token goes to one expert with probability 1.
# Modelled: a tiny top-1 MoE (router Linear(16, 8), 8 linear experts; output = p_chosen * expert(x)) learns
# a regression for 80 Adam steps from a router initialised with uneven routing. The experts that get
# tokens improve and attract more ("rich get richer"); with the loss term the router is pushed back.
# We read the busiest expert's share of 4,096 held-out tokens, times N (1.0 = perfectly even).
# Negative controls: the loss on a routing where every token goes to one expert; the same training with the
# loss term removed (alpha = 0). Each rank runs the same model (the claim is about one router).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/model-parallelism/moe_balance_loss.py
import torch
from accelerate import Accelerator
from transformers.models.switch_transformers import modeling_switch_transformers as switch

import _claims

EXPERTS, WIDTH, TOKENS, STEPS = 8, 16, 256, 80
ALPHA = 1.0  # weighed against this task's small MSE; a language model weighs it against its cross-entropy
accelerator = Accelerator()

# --- the loss on fixed routings: [batch 1, tokens, experts] probabilities and [1, tokens] choices -------
round_robin = torch.arange(TOKENS) % EXPERTS
even = switch.load_balancing_loss_func(torch.full((1, TOKENS, EXPERTS), 1 / EXPERTS), round_robin[None])
collapsed_probs = torch.nn.functional.one_hot(torch.zeros(TOKENS, dtype=torch.long), EXPERTS).float()[None]
collapsed = switch.load_balancing_loss_func(collapsed_probs, torch.zeros(1, TOKENS, dtype=torch.long))
_claims.between(
    "balance_loss_is_one_when_even",
    measured=even.item(),
    control=collapsed.item(),  # every token to expert 0 with probability 1
    low=0.999,
    high=1.001,
    experts=EXPERTS,
)


# --- the tiny MoE, trained with and without the term -------------------------------------------------------
def busiest_share(router, tokens):
    counts = torch.bincount(router(tokens).argmax(-1), minlength=EXPERTS)
    return counts.max().item() * EXPERTS / tokens.shape[0]


def train(alpha):
    torch.manual_seed(0)
    router = torch.nn.Linear(WIDTH, EXPERTS, bias=False)
    with torch.no_grad():
        router.weight.mul_(3.0)  # a confident, uneven router to start from
    experts = torch.nn.Linear(WIDTH, EXPERTS)  # column i is expert i's linear predictor
    teacher = torch.randn(WIDTH, 1)
    held_out = torch.randn(4096, WIDTH)
    start = busiest_share(router, held_out)
    optimizer = torch.optim.Adam([*router.parameters(), *experts.parameters()], lr=1e-2)
    for _ in range(STEPS):
        x = torch.randn(TOKENS, WIDTH)
        target = torch.tanh(x @ teacher)
        probs = router(x).softmax(-1)
        chosen = probs.argmax(-1)
        output = (experts(x) * probs).gather(1, chosen[:, None])  # top-1: p_i * E_i(x)
        task = torch.nn.functional.mse_loss(output, target)
        balance = switch.load_balancing_loss_func(probs[None], chosen[None])
        (task + alpha * balance).backward()
        optimizer.step()
        optimizer.zero_grad()
    return start, busiest_share(router, held_out), task.item(), balance.item()


start, balanced, balanced_task, balanced_aux = train(ALPHA)
_, unbalanced, unbalanced_task, unbalanced_aux = train(0.0)
_claims.at_most(
    "balance_loss_evens_out_routing",
    measured=balanced,
    control=unbalanced,  # the same training with the loss term removed
    tolerance=1.25,
    busiest_share_at_start=start,
    task_loss_with_term=balanced_task,
    task_loss_without_term=unbalanced_task,
    balance_loss_with_term=balanced_aux,
    balance_loss_without_term=unbalanced_aux,
    alpha=ALPHA,
    steps=STEPS,
)
