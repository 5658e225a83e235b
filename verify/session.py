"""Runs a set of proofs (each snippet once, whatever the mode) and judges and records every claim."""

from __future__ import annotations

import concurrent.futures
import dataclasses
from pathlib import Path

from verify import evidence, mutation, reaper
from verify.judge import MutantVerdict, Results, Verdict, judge, judge_mutant
from verify.mutation import named_mutants
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


def mutant_run_name(proof: Proof, mutant: str) -> str:
    return f"{proof.name}@{mutant}"


def verify_proofs(
    proofs: list[Proof],
    settings: LaunchSettings,
    work_dir: Path,
    mode: str = "grouped",
    evidence_dir: Path | None = evidence.EVIDENCE_DIR,
    reuse_evidence: bool = False,
) -> dict[tuple[str, str, str], Verdict]:
    """(page slug, snippet, claim id) -> verdict; see `verify`."""
    return verify(proofs, settings, work_dir, mode, evidence_dir, reuse_evidence).verdicts


def verify(
    proofs: list[Proof],
    settings: LaunchSettings,
    work_dir: Path,
    mode: str = "grouped",
    evidence_dir: Path | None = evidence.EVIDENCE_DIR,
    reuse_evidence: bool = False,
    mutants: bool = False,
) -> Results:
    """Runs each snippet once (and, with `mutants`, once more per mutant its claims name) and judges it.

    Missing snippets are judged without a launch. With `reuse_evidence`, a proof whose fingerprint
    (snippet, claims, versions, launch, harness) matches its latest evidence, in which every claim came
    out as declared (and, with `mutants`, every named mutant was caught), is not run again.
    """
    results = Results()
    if reuse_evidence and evidence_dir is not None:
        still_to_run = []
        for proof in proofs:
            launch = settings_for(proof, settings)
            reused = None if skip_reason(proof, settings) else evidence.reused_verdicts(proof, launch, evidence_dir)
            reused_mutants = evidence.reused_mutant_verdicts(proof, named_mutants(proof), evidence_dir) if mutants else {}
            if reused is None or reused_mutants is None:
                still_to_run.append(proof)
                continue
            for verdict in reused:
                results.verdicts[(proof.page, proof.snippet, verdict.claim)] = verdict
            for verdict in reused_mutants.values():
                results.mutants[(proof.page, proof.snippet, verdict.mutant)] = verdict
        proofs = still_to_run
    runnable = [p for p in proofs if p.path.exists() and not skip_reason(p, settings)]
    # One launch configuration per process count; each snippet runs once whichever pages name it.
    # Mutant runs go after every plain run of their launch: a mutant that crashes costs a new launch,
    # never the plain verdicts.
    groups: dict[tuple[int, int], tuple[LaunchSettings, dict[str, SnippetSpec], dict[str, SnippetSpec]]] = {}
    for proof in runnable:
        catalogue = mutation.catalogue_for(proof) if mutants else {}
        launch = settings_for(proof, settings)
        _, specs, mutant_specs = groups.setdefault((launch.num_processes, launch.num_machines), (launch, {}, {}))
        specs.setdefault(proof.name, SnippetSpec(proof.name, str(proof.path), proof.timeout))
        for name in named_mutants(proof):
            if name in catalogue:  # an unknown name is judged below ("no such mutant"), without a run
                mutant = {"name": name, "source": str(catalogue[name].source)}
                run_name = mutant_run_name(proof, name)
                mutant_specs.setdefault(run_name, SnippetSpec(run_name, str(proof.path), proof.timeout, mutant))
    runs = {}
    for (processes, machines), (launch, specs, mutant_specs) in groups.items():
        folder = work_dir / (f"nproc-{processes}" + (f"-nnodes-{machines}" if machines > 1 else ""))
        runs.update(run_snippets([*specs.values(), *mutant_specs.values()], launch, folder, mode))
    for proof in proofs:
        if skip_reason(proof, settings):
            continue
        launch = settings_for(proof, settings)
        run = runs.get(proof.name)
        proof_verdicts = judge(proof, run, launch)
        mutant_verdicts = []
        if mutants:
            catalogue = mutation.catalogue_for(proof)
            for name in named_mutants(proof):
                if name not in catalogue:
                    mutant_verdicts.append(unknown_mutant(proof, name))
                    continue
                mutant_verdicts.append(judge_mutant(proof, catalogue[name], runs.get(mutant_run_name(proof, name)), launch))
        if evidence_dir is not None and proof.path.exists() and not reaper.stopping.is_set():
            record = evidence.record(proof, run, proof_verdicts, launch, mutant_verdicts if mutants else None, evidence_dir)
            evidence.write(record, evidence_dir)
        for verdict in proof_verdicts:
            results.verdicts[(proof.page, proof.snippet, verdict.claim)] = verdict
        for verdict in mutant_verdicts:
            results.mutants[(proof.page, proof.snippet, verdict.mutant)] = verdict
    return results


def unknown_mutant(proof: Proof, name: str) -> MutantVerdict:
    where = f"page {proof.page}, snippet {proof.snippet}, mutant {name}"
    unloadable = "".join(f"; {problem}" for problem in mutation.catalogue_problems(proof))
    return MutantVerdict(proof.page, proof.snippet, name, "", "not_run",
                         f"{where}: no snippets/*/{mutation.MUTANTS_FILE} defines a mutant of that name{unloadable}",
                         [], {})  # fmt: skip


def verify_all(
    proofs: list, settings: LaunchSettings, work_dir: Path, mode: str = "grouped", reuse_evidence: bool = False,
    evidence_dir: Path | None = evidence.EVIDENCE_DIR, executed_dir: Path | None = None, mutants: bool = False,
) -> Results:  # fmt: skip
    """Snippets (with their mutants) and labs (verify/labs.py) together. SIGTERM, SIGHUP or Ctrl-C stop
    both at once: every launch and kernel is killed and nothing is recorded for what was cut short
    (verify/reaper.py)."""
    from verify.labs import EXECUTED_DIR, LabProof, verify_labs

    labs = [proof for proof in proofs if isinstance(proof, LabProof)]
    proofs = [proof for proof in proofs if not isinstance(proof, LabProof)]
    with reaper.stop_on_signals(), concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        # The labs' kernels start and import while the snippets' launch runs: much of either is waiting
        # (imports, barriers, the hang proofs' deadlines), so the two overlap well even on two cores.
        lab_results = pool.submit(verify_labs, labs, work_dir / "labs", evidence_dir,
                                  executed_dir or EXECUTED_DIR, reuse_evidence, mutants)  # fmt: skip
        found = verify(proofs, settings, work_dir, mode, evidence_dir, reuse_evidence, mutants)
        found.verdicts.update(lab_results.result().verdicts)
        found.mutants.update(lab_results.result().mutants)
        return found
