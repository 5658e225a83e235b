# Who makes Accelerate, and how little it asks of a training loop. The installed package says who
# publishes it (its metadata) and who holds the copyright on its code (the header of every source
# file); prepare() is the one call that turns plain PyTorch objects into distributed ones.
# Negative controls: torch's metadata names another author; the companies a handout names as
# co-developers (NVIDIA, AWS/Amazon, Microsoft) appear in no copyright header; unprepared objects
# keep their plain PyTorch types.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/foundations/accelerate_package_provenance.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import importlib.metadata
import pathlib
import re

import torch
import accelerate
from accelerate import Accelerator

import _claims

accelerator = Accelerator()


def author(distribution):
    meta = importlib.metadata.metadata(distribution)
    return meta.get("Author") or meta.get("Author-email")  # torch fills only Author-email


# --- who publishes the package: the metadata pip installed with it ---
meta = importlib.metadata.metadata("accelerate")
_claims.equal(
    "metadata_author_is_hugging_face",
    measured=author("accelerate"),
    control=author("torch"),
    expected="The Hugging Face team",
    version=meta["Version"],
    author_email=meta.get("Author-email"),
    home_page=meta.get("Home-page"),
    license=meta.get("License"),
)

# --- who holds the copyright: the first "# Copyright ..." line of every source file ---
sources = sorted(pathlib.Path(accelerate.__file__).parent.rglob("*.py"))
headers = []
for path in sources:
    match = re.search(r"^# Copyright .*$", path.read_text(encoding="utf-8"), flags=re.MULTILINE)
    headers.append(match.group(0) if match else "")
huggingface = sum("HuggingFace" in line for line in headers)
# The handout says NVIDIA, AWS and Microsoft co-develop it: a header naming any of them would show it.
named_by_handout = sum(bool(re.search(r"NVIDIA|AWS|Amazon|Microsoft", line, re.IGNORECASE)) for line in headers)
# Those names do occur in the code, as integrations Accelerate drives (Megatron-LM, Transformer
# Engine, DeepSpeed, SageMaker), which is not authorship.
mentioning = sum(
    bool(re.search(r"nvidia|aws|amazon|microsoft", path.read_text(encoding="utf-8"), re.IGNORECASE)) for path in sources
)
_claims.equal(
    "copyright_headers_name_hugging_face",
    measured=huggingface,
    control=named_by_handout,
    expected=len(sources),
    source_files=len(sources),
    files_without_header=headers.count(""),
    files_mentioning_nvidia_aws_microsoft_anywhere=mentioning,
    distinct_headers=sorted(set(headers)),
)

# --- the minimal API: the same objects before and after prepare() ---
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(torch.arange(8.0).unsqueeze(1), batch_size=2)
before = [type(obj).__name__ for obj in (model, optimizer, loader)]
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
after = [type(obj).__name__ for obj in (model, optimizer, loader)]
# One process has nothing to synchronise, so prepare() leaves the model unwrapped there.
expected_model = "DistributedDataParallel" if accelerator.num_processes > 1 else "Linear"
_claims.equal(
    "prepare_swaps_in_distributed_wrappers",
    measured=after,
    control=before,
    expected=[expected_model, "AcceleratedOptimizer", "DataLoaderShard"],
    distributed_type=str(accelerator.distributed_type),
)
