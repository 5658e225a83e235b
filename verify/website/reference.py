"""The committed reference evidence: what a fresh clone's site shows before its own first `pytest verify`.

    python -m verify.website.reference            # copy this machine's latest evidence and executed labs
    python -m verify.website.reference --check    # list the proofs the reference set lacks or holds stale

It copies `.verify/evidence/<page>/<snippet>.json` into `reference-evidence/<page>/` and `.verify/labs/*.ipynb` into
`reference-evidence/labs/`, each evidence file labelled with the machine it was measured on (system,
processor, GPUs), so the site can say "Reference evidence, measured on <machine> on <date>". The site
uses it only for a proof this machine has no evidence of (verify/evidence.py `shown`); the harness never
reads it. Run it after a full `python -m pytest verify` whose proofs all held.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

from verify import evidence, labs
from verify.website import lab_pages
from verify.pages import all_proofs, load_pages
from verify.paths import REFERENCE_DIR


def describe_machine() -> str:
    """'a Linux x86_64 machine with 2 CPU cores (Intel Xeon ...), no GPU' in words a reader understands."""
    processor = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                processor = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import torch

        gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    except ImportError:
        gpus = []
    system = {"Darwin": "macOS"}.get(platform.system(), platform.system())
    cores = os.cpu_count() or 0
    gpu = f"{len(gpus)} GPU{'s' if len(gpus) > 1 else ''} ({', '.join(sorted(set(gpus)))})" if gpus else "no GPU"
    return f"a {system} {platform.machine()} machine with {cores} CPU cores ({processor}), {gpu}"


def expected_files() -> list[str]:
    """The evidence files a complete reference set has, as '<page>/<snippet>.json': every proof of every
    page and lab (evidence is kept per page and snippet: verify/evidence.py `path_of`)."""
    proofs = all_proofs(load_pages()) + labs.load_labs()[0]
    return sorted({evidence.path_of(proof.page, proof.snippet, Path()).as_posix() for proof in proofs})


def evidence_files(folder: Path) -> dict[str, Path]:
    """'<page>/<snippet>.json' -> path, for every evidence file under `folder` (labs' notebooks aside)."""
    return {path.relative_to(folder).as_posix(): path for path in sorted(folder.glob("*/*.json"))}


def refresh(source: Path = evidence.EVIDENCE_DIR, labs_source: Path = labs.EXECUTED_DIR, target: Path = REFERENCE_DIR,
            machine: str | None = None) -> tuple[int, list[str]]:  # fmt: skip
    """Replace the reference set by this machine's evidence; returns (files copied, proofs still missing)."""
    machine = machine or describe_machine()
    wanted = set(expected_files())
    target.mkdir(parents=True, exist_ok=True)
    for old in evidence_files(target).values():
        old.unlink()
    copied = 0
    for name, path in evidence_files(source).items():
        if name not in wanted:
            continue  # evidence of a proof no page declares any more
        record = json.loads(path.read_text())
        record["machine"] = machine
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        (target / name).write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        copied += 1
    if labs_source.exists():
        (target / "labs").mkdir(exist_ok=True)
        for old in (target / "labs").glob("*.ipynb"):
            old.unlink()
        for notebook in sorted(labs_source.glob("*.ipynb")):
            executed = json.loads(notebook.read_text())
            lab_pages.drop_noise(executed)  # tqdm's warning carries this machine's paths
            (target / "labs" / notebook.name).write_text(json.dumps(executed, indent=1, ensure_ascii=False) + "\n")
    for folder in target.iterdir():  # a page no longer declaring proofs leaves no empty folder behind
        if folder.is_dir() and folder.name != "labs" and not any(folder.iterdir()):
            folder.rmdir()
    missing = sorted(wanted - set(evidence_files(target)))
    return copied, missing


def check(target: Path = REFERENCE_DIR) -> list[str]:
    """Problems of the committed set: proofs without reference evidence, or whose claims changed since."""
    problems = [f"no reference evidence: {name}" for name in expected_files() if not (target / name).exists()]
    for proof in all_proofs(load_pages()) + labs.load_labs()[0]:
        found = evidence.read(proof, target)
        if found and not evidence.matches_claims(found, proof.claims):
            problems.append(f"reference evidence predates the page's claims: {proof.snippet}")
        elif found and not all(evidence.as_declared(claim) for claim in found["claims"]):
            problems.append(f"a claim failed in the reference run: {proof.snippet}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only report what the committed set lacks")
    parser.add_argument("--machine", help="describe the machine in words (default: from this machine)")
    args = parser.parse_args(argv)
    if args.check:
        problems = check()
        print("\n".join(problems) or "the reference set covers every proof, and every claim held")
        return 1 if problems else 0
    copied, missing = refresh(machine=args.machine)
    print(f"copied {copied} evidence files into {REFERENCE_DIR}")
    if missing:
        print(f"{len(missing)} proofs have no evidence on this machine yet: " + ", ".join(missing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
