"""Runs a set of proofs (each snippet once, whatever the mode) and judges and records every claim."""

from __future__ import annotations

import concurrent.futures
import dataclasses
from pathlib import Path

from verify import evidence, reaper
from verify.judge import Verdict, judge
from verify.pages import Proof
from verify.runner import LaunchSettings, SnippetSpec, run_snippets


def settings_for(proof: Proof, settings: LaunchSettings) -> LaunchSettings:
    """The launch a proof needs: its own process and node counts if it was written for them, else the session's.

    A proof written for 2 processes runs one per node under --nnodes 2; one written for one node keeps
    one node (with the session's processes per node unless it names its own count).
    """
    machines = settings.num_machines
    if proof.nodes is not None and proof.nodes != machines:
        machines = proof.nodes
    processes = proof.processes or settings.processes_per_machine * machines
    if processes % machines:
        machines = 1
    if (processes, machines) == (settings.num_processes, settings.num_machines):
        return settings
    # same device choice as the session
    return dataclasses.replace(settings, num_processes=processes, num_machines=machines)


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
    reuse_evidence: bool = False,
) -> dict[tuple[str, str, str], Verdict]:
    """(page slug, snippet, claim id) -> verdict. Missing snippets are judged without a launch.

    With `reuse_evidence`, a proof whose fingerprint (snippet, claims, versions, launch, harness) matches
    its latest passing evidence is not run again: its recorded verdicts stand.
    """
    verdicts = {}
    if reuse_evidence and evidence_dir is not None:
        still_to_run = []
        for proof in proofs:
            reused = None if skip_reason(proof, settings) else evidence.reused_verdicts(
                proof, settings_for(proof, settings), evidence_dir
            )  # fmt: skip
            for verdict in reused or []:
                verdicts[(proof.page, proof.snippet, verdict.claim)] = verdict
            if reused is None:
                still_to_run.append(proof)
        proofs = still_to_run
    runnable = [p for p in proofs if p.path.exists() and not skip_reason(p, settings)]
    # One launch configuration per process count; each snippet runs once whichever pages name it.
    groups: dict[tuple[int, int], tuple[LaunchSettings, dict[str, SnippetSpec]]] = {}
    for proof in runnable:
        launch = settings_for(proof, settings)
        _, specs = groups.setdefault((launch.num_processes, launch.num_machines), (launch, {}))
        specs.setdefault(proof.name, SnippetSpec(proof.name, str(proof.path), proof.timeout))
    runs = {}
    for (processes, machines), (launch, specs) in groups.items():
        folder = work_dir / (f"nproc-{processes}" + (f"-nnodes-{machines}" if machines > 1 else ""))
        runs.update(run_snippets(list(specs.values()), launch, folder, mode))
    for proof in proofs:
        if skip_reason(proof, settings):
            continue
        launch = settings_for(proof, settings)
        run = runs.get(proof.name)
        proof_verdicts = judge(proof, run, launch)
        if evidence_dir is not None and proof.path.exists() and not reaper.stopping.is_set():
            evidence.write(evidence.record(proof, run, proof_verdicts, launch), evidence_dir)
        for verdict in proof_verdicts:
            verdicts[(proof.page, proof.snippet, verdict.claim)] = verdict
    return verdicts


def verify_all(
    proofs: list, settings: LaunchSettings, work_dir: Path, mode: str = "grouped", reuse_evidence: bool = False,
    evidence_dir: Path | None = evidence.EVIDENCE_DIR, executed_dir: Path | None = None,
) -> dict[tuple[str, str, str], Verdict]:  # fmt: skip
    """Snippets and labs (verify/labs.py) together. SIGTERM, SIGHUP or Ctrl-C stop both at once: every
    launch and kernel is killed and nothing is recorded for what was cut short (verify/reaper.py)."""
    from verify.labs import EXECUTED_DIR, LabProof, verify_labs

    labs = [proof for proof in proofs if isinstance(proof, LabProof)]
    proofs = [proof for proof in proofs if not isinstance(proof, LabProof)]
    with reaper.stop_on_signals(), concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        # The labs' kernels start and import while the snippets' launch runs: much of either is waiting
        # (imports, barriers, the hang proofs' deadlines), so the two overlap well even on two cores.
        lab_verdicts = pool.submit(verify_labs, labs, work_dir / "labs", evidence_dir,
                                   executed_dir or EXECUTED_DIR, reuse_evidence)  # fmt: skip
        verdicts = verify_proofs(proofs, settings, work_dir, mode, evidence_dir, reuse_evidence)
        return {**verdicts, **lab_verdicts.result()}
