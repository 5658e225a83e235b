"""Runs a set of proofs (each snippet once, whatever the mode) and judges and records every claim."""

from __future__ import annotations

from pathlib import Path

from verify import evidence
from verify.judge import Verdict, judge
from verify.pages import Proof
from verify.runner import LaunchSettings, SnippetSpec, run_snippets


def skip_reason(proof: Proof, settings: LaunchSettings) -> str | None:
    if proof.requires == "cuda" and settings.use_cpu:
        return f"{proof.snippet} needs {settings.num_processes} CUDA GPUs; this machine runs the proofs on CPU"
    return None


def verify_proofs(
    proofs: list[Proof],
    settings: LaunchSettings,
    work_dir: Path,
    mode: str = "grouped",
    evidence_dir: Path | None = evidence.EVIDENCE_DIR,
) -> dict[tuple[str, str], list[Verdict]]:
    """(page slug, claim id) -> verdicts. Missing snippets are judged without a launch."""
    runnable = [p for p in proofs if p.path.exists() and not skip_reason(p, settings)]
    specs, seen = [], set()
    for proof in runnable:
        if proof.name not in seen:
            seen.add(proof.name)
            specs.append(SnippetSpec(proof.name, str(proof.path), proof.timeout))
    runs = run_snippets(specs, settings, work_dir, mode)
    verdicts = {}
    for proof in proofs:
        if skip_reason(proof, settings):
            continue
        run = runs.get(proof.name)
        proof_verdicts = judge(proof, run, settings)
        if evidence_dir is not None and proof.path.exists():
            evidence.write(evidence.record(proof, run, proof_verdicts, settings), evidence_dir)
        for verdict in proof_verdicts:
            verdicts[(proof.page, verdict.claim)] = verdict
    return verdicts
