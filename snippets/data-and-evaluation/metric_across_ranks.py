# Computing accuracy correctly across 2 ranks. 10 evaluation samples, batches of 4; the "model" gets
# samples 0-5 right and 6-9 wrong, so the true accuracy is 6/10 = 0.6.
#   * gather_for_metrics returns the 10 predictions; plain gather returns 16, because prepare() padded
#     the last round with samples 0-5 (even_batches=True), and those padded samples are all "right".
#   * with even_batches=False the ranks hold 6 and 4 samples; averaging the two per-rank accuracies
#     weights them equally and misses 0.6; summing the correct counts and the sample counts across
#     ranks (accelerator.reduce) and dividing once gives 0.6 exactly.
#   * strings (per-sample texts) take gather_for_metrics' gather_object path and are truncated the same way
#     (since 0.30.0; 0.23-0.29 returned them uncut).
# Negative controls: plain gather and gather_object (padding kept); the mean of per-rank accuracies;
# (Summed counts under the default padding, a batch sampler without batch_size: metrics_padding_edges.py.)
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/data-and-evaluation/metric_across_ranks.py
import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, gather_object
from torch.utils.data import DataLoader

import _claims

N = 10
labels = torch.zeros(N, dtype=torch.long)
predictions = torch.cat([torch.zeros(6, dtype=torch.long), torch.ones(4, dtype=torch.long)])  # 6 right, 4 wrong
TRUE_ACCURACY = (predictions == labels).double().mean().item()  # 0.6, on one process, no distribution


def evaluate(accelerator, gather):
    """Gather (sample id, correct?) over one evaluation epoch; return accuracy and how many samples counted."""
    loader = accelerator.prepare(DataLoader(torch.arange(N), batch_size=4))
    correct = []
    for ids in loader:
        hits = (predictions[ids.cpu()] == labels[ids.cpu()]).to(accelerator.device)  # per-sample result
        correct.append(gather(hits))
    correct = torch.cat(correct)
    return correct.double().mean().item(), len(correct)


# --- 1. gather_for_metrics drops the wrap-around duplicates ---
accelerator = Accelerator()  # even_batches=True: 16 samples are iterated for 10
accuracy, counted = evaluate(accelerator, accelerator.gather_for_metrics)
padded_accuracy, padded_counted = evaluate(accelerator, accelerator.gather)
_claims.equal(
    "gather_for_metrics_counts_each_sample_once",
    measured=counted,
    control=padded_counted,  # plain gather: the padding is counted too
    expected=N,
    accuracy_gather_for_metrics=accuracy,
    accuracy_gather=padded_accuracy,
    true_accuracy=TRUE_ACCURACY,
)
_claims.at_most(
    "gather_for_metrics_gives_the_true_accuracy",
    measured=abs(accuracy - TRUE_ACCURACY),
    control=abs(padded_accuracy - TRUE_ACCURACY),
    tolerance=1e-12,
    accuracy_gather_for_metrics=accuracy,
    accuracy_gather=padded_accuracy,
)

# --- 1b. the gather_object path: non-tensor results (strings) are truncated the same way ---
def evaluate_objects(accelerator, gather):
    """Gather one string per sample over one evaluation epoch (what a generation eval collects)."""
    loader = accelerator.prepare(DataLoader(torch.arange(N), batch_size=4))
    texts = []
    for ids in loader:
        texts += gather([f"sample {i}" for i in ids.tolist()])  # a list of str: not tensors
    return texts


texts = evaluate_objects(accelerator, accelerator.gather_for_metrics)  # takes its gather_object path
padded_texts = evaluate_objects(accelerator, gather_object)
_claims.equal(
    "gather_for_metrics_object_path_counts_each_sample_once",
    measured=sorted(texts),
    control=sorted(padded_texts),  # gather_object: the padding is counted too
    expected=sorted(f"sample {i}" for i in range(N)),
    gathered=len(texts),
    gathered_by_gather_object=len(padded_texts),
)

# --- 2. uneven shards (even_batches=False): sum counts across ranks, do not average rates ---
uneven = Accelerator(dataloader_config=DataLoaderConfiguration(even_batches=False))
loader = uneven.prepare(DataLoader(torch.arange(N), batch_size=4))
hits, seen = 0, 0
for ids in loader:
    hits += (predictions[ids] == labels[ids]).sum().item()
    seen += len(ids)
local_accuracy = hits / seen
counts = uneven.reduce(torch.tensor([hits, seen], dtype=torch.float64, device=uneven.device), reduction="sum")
summed_accuracy = (counts[0] / counts[1]).item()  # one division, after summing over ranks
mean_of_rates = uneven.reduce(torch.tensor([local_accuracy], dtype=torch.float64, device=uneven.device), "mean").item()
_claims.at_most(
    "sum_counts_then_divide",
    measured=abs(summed_accuracy - TRUE_ACCURACY),
    control=abs(mean_of_rates - TRUE_ACCURACY),  # average of the two per-rank accuracies
    tolerance=1e-12,
    samples_per_rank=uneven.gather(torch.tensor([seen], device=uneven.device)).tolist(),
    accuracy_per_rank=uneven.gather(torch.tensor([local_accuracy], dtype=torch.float64, device=uneven.device)).tolist(),
    summed_accuracy=summed_accuracy,
    mean_of_per_rank_accuracies=mean_of_rates,
)

