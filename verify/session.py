"""Runs a set of proofs (each snippet once, whatever the mode) and judges and records every claim."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from verify import evidence
from verify.judge import Verdict, judge
from verify.pages import Proof
from verify.runner import LaunchSettings, SnippetSpec, run_snippets


def settings_for(proof: Proof, settings: LaunchSettings) -> LaunchSettings:
    """The launch a proof needs: its own process count if it was written for one, else the session's."""
    processes = proof.world_size(settings.num_processes)
    if processes == settings.num_processes:
        return settings
    return dataclasses.replace(settings, num_processes=processes)  # same device choice as the session


def skip_reason(proof: Proof, settings: LaunchSettings) -> str | None:
    launch = settings_for(proof, settings)
    if proof.requires == "cuda" and launch.use_cpu:
        return f"{proof.snippet} needs {launch.num_processes} CUDA GPUs; this machine runs the proofs on CPU"
    return None


def verify_proofs(
    proofs: list[Proof],
    settings: LaunchSettings,
    work_dir: Path,
    mode: str = "grouped",
    evidence_dir: Path | None = evidence.EVIDENCE_DIR,
) -> dict[tuple[str, str, str], Verdict]:
    """(page slug, snippet, claim id) -> verdict. Missing snippets are judged without a launch."""
    runnable = [p for p in proofs if p.path.exists() and not skip_reason(p, settings)]
    # One launch configuration per process count; each snippet runs once whichever pages name it.
    groups: dict[int, tuple[LaunchSettings, dict[str, SnippetSpec]]] = {}
    for proof in runnable:
        launch = settings_for(proof, settings)
        _, specs = groups.setdefault(launch.num_processes, (launch, {}))
        specs.setdefault(proof.name, SnippetSpec(proof.name, str(proof.path), proof.timeout))
    runs = {}
    for processes, (launch, specs) in groups.items():
        runs.update(run_snippets(list(specs.values()), launch, work_dir / f"nproc-{processes}", mode))
    verdicts = {}
    for proof in proofs:
        if skip_reason(proof, settings):
            continue
        launch = settings_for(proof, settings)
        run = runs.get(proof.name)
        proof_verdicts = judge(proof, run, launch)
        if evidence_dir is not None and proof.path.exists():
            evidence.write(evidence.record(proof, run, proof_verdicts, launch), evidence_dir)
        for verdict in proof_verdicts:
            verdicts[(proof.page, proof.snippet, verdict.claim)] = verdict
    return verdicts
