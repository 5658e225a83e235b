"""The machine-readable record of each proof's latest run, read back by the site."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import importlib.metadata
import json
import os
import platform
import tempfile
import warnings
from pathlib import Path

from pydantic import ValidationError

from verify import environment
from verify.evidence_schema import EvidenceRecord, MatrixSummary
from verify.judge import MutantVerdict, Verdict
from verify.mutation import MutantError, catalogue_for, catalogue_problems
from verify.pages import Proof
from verify.paths import EVIDENCE_DIR, MATRIX_DIR, REFERENCE_EVIDENCE_DIR, SNIPPETS_DIR
from verify.runner import MEMORY_LIMIT_MB, LaunchSettings, SnippetRun

HARNESS_DIR = Path(__file__).resolve().parent


def versions() -> dict:
    found = {"python": platform.python_version()}
    for package in ("torch", "accelerate", "transformers"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = None
    return found


def fingerprint(proof: Proof, settings: LaunchSettings) -> str:
    """Everything a verdict depends on: the snippet and the helper modules beside it and at the top of the
    snippets folder (the judge's `_claims.py` too, which labs import from there), the page's claims and
    time limit, the installed versions, the launch asked for (the accelerate config's contents, not only
    its path), and the harness itself. Equal fingerprints, same verdicts."""
    digest = hashlib.sha256()
    helpers = sorted({*proof.path.parent.glob("_*.py"), *proof.snippets_dir.glob("_*.py"), *SNIPPETS_DIR.glob("_*.py"),
                      *mutant_sources(proof)})  # fmt: skip
    harness = sorted(HARNESS_DIR.glob("*.py"))  # the proof side only: verify/website/ never changes a verdict
    for path in [proof.path, *helpers, *harness]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    declared = {
        "claims": {claim_id: dataclasses.asdict(claim) for claim_id, claim in proof.claims.items()},
        "timeout": proof.timeout,
        "versions": versions(),
        "launch": [settings.num_processes, settings.num_machines, settings.expected_backend, settings.config_file,
                   list(settings.extra_args)],
        "accelerate_config": file_digest(settings.config_file),
        "memory_limit_mb": settings.memory_limit_mb,
        "requires": proof.requires,
        "environment": ranks_environment(settings),
    }  # fmt: skip
    digest.update(json.dumps(declared, sort_keys=True).encode())
    return digest.hexdigest()


def ranks_environment(settings: LaunchSettings) -> dict:
    """The variables of the ranks' environment that can change a result (verify/environment.py): part of
    the fingerprint, so a run under other TORCH_*, NCCL_*, OMP_*... variables is never reused for this one."""
    return environment.that_matters(settings.environment())


def mutant_sources(proof: Proof) -> set:
    """The files defining the mutants this proof's claims name: a changed mutant is a changed proof."""

    names = {name for claim in proof.claims.values() for name in claim.breaks_when}
    if not names:
        return set()
    try:
        known = catalogue_for(proof)
    except MutantError:
        return set()  # the catalogue's own test names the problem
    for problem in catalogue_problems(proof):  # a file that cannot be loaded: named, its mutants unknown
        warnings.warn(problem, UnreadableMutants, stacklevel=2)
    return {known[name].source for name in names if name in known}


class UnreadableMutants(UserWarning):
    """A _mutants.py that raises when loaded: the proofs naming its mutants fail; nothing else does."""


def file_digest(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as error:  # the launch will fail on it; the fingerprint just must not match a good run
        return f"unreadable: {error}"


def as_declared(claim: dict) -> bool:
    """A recorded claim came out as its page says: it held, or (outside its release range) it was measured
    and did not hold. A crash or a missing report outside the range says nothing either way."""
    if claim.get("expected_here", True):
        return claim["passed"]
    return not claim["passed"] and claim.get("by_value", False)


def matches_claims(found: dict, declared: dict) -> bool:
    """The evidence speaks for the claims the page makes now (same ids, same statements)."""
    return {claim["id"] for claim in found["claims"]} == set(declared) and all(
        claim.get("statement") == declared[claim["id"]].says for claim in found["claims"]
    )


def matches_code(found: dict, proof: Proof) -> bool:
    """Whether this evidence was made by the code and inputs there are now (same fingerprint, under the
    launch it records): False once the snippet, its helpers, the claims or the harness changed since.
    For the site, which has no launch settings of its own."""
    asked = found.get("asked") or {}
    if not found.get("fingerprint") or not proof.path.exists() or "num_processes" not in asked:
        return False
    settings = LaunchSettings(
        num_processes=asked["num_processes"], num_machines=asked.get("num_machines", 1),
        config_file=asked.get("config_file"), extra_args=tuple(asked.get("extra_args") or ()),
        use_cpu=asked.get("backend") != "nccl", memory_limit_mb=asked.get("memory_limit_mb", MEMORY_LIMIT_MB),
    )  # fmt: skip
    return found["fingerprint"] == fingerprint(proof, settings)


def reusable(proof: Proof, settings: LaunchSettings, evidence_dir: Path = EVIDENCE_DIR) -> dict | None:
    """The latest evidence of this proof if nothing it depends on has changed since, and every claim held."""
    found = read(proof, evidence_dir) if proof.path.exists() else None
    if not found or found.get("fingerprint") != fingerprint(proof, settings):
        return None
    return found if all(as_declared(claim) for claim in found["claims"]) else None


def reused_verdicts(proof: Proof, settings: LaunchSettings, evidence_dir: Path = EVIDENCE_DIR) -> list | None:
    """The verdicts recorded in reusable evidence of this proof, or None when it must run again."""

    found = reusable(proof, settings, evidence_dir)
    if found is None:
        return None
    return [
        Verdict(proof.page, proof.snippet, claim["id"], claim["passed"], "reused: " + claim["reason"],
                [{**report, "claim": claim["id"]} for report in claim["reports"]], claim.get("by_value", False))
        for claim in found["claims"]
    ]  # fmt: skip


def mutants_section(mutant_verdicts: list) -> list:
    return [
        {"mutant": v.mutant, "describes": v.describes, "status": v.status, "reason": v.reason,
         "reached_ranks": v.reached_ranks, "claims": [{"id": claim, **found} for claim, found in v.claims.items()]}
        for v in mutant_verdicts
    ]  # fmt: skip


def reused_mutant_verdicts(proof: Proof, names: list, evidence_dir: Path = EVIDENCE_DIR) -> dict | None:
    """The recorded mutant verdicts of this proof if each named mutant was caught in its latest evidence."""

    found = read(proof, evidence_dir) if names and proof.path.exists() else None
    if not names:
        return {}
    recorded = {entry["mutant"]: entry for entry in (found or {}).get("mutants") or []}
    if set(names) - set(recorded) or any(recorded[name]["status"] != "killed" for name in names):
        return None
    return {
        name: MutantVerdict(proof.page, proof.snippet, name, recorded[name]["describes"], "killed",
                            "reused: " + recorded[name]["reason"], recorded[name]["reached_ranks"],
                            {c["id"]: {k: v for k, v in c.items() if k != "id"} for c in recorded[name]["claims"]})
        for name in names
    }  # fmt: skip


def record(
    proof: Proof,
    run: SnippetRun | None,
    verdicts: list,
    settings: LaunchSettings,
    mutant_verdicts: list | None = None,
    evidence_dir: Path | None = None,
) -> dict:
    """The evidence of one proof's run; without mutant runs this time, the mutant evidence of the same
    fingerprint is kept (a plain rerun of an unchanged proof does not forget what its mutants showed)."""
    ranks = run.ranks if run else {}
    states = {str(rank): outcome.state for rank, outcome in sorted(ranks.items())}
    first = next((state for state in states.values() if state), {}) or {}
    installed = versions()
    current = fingerprint(proof, settings) if proof.path.exists() else None
    if mutant_verdicts is not None:
        mutants = mutants_section(mutant_verdicts)
    else:
        before = read(proof, evidence_dir) if evidence_dir is not None else None
        mutants = (before or {}).get("mutants") if (before or {}).get("fingerprint") == current else None
    found = {
        "page": proof.page,
        "snippet": proof.snippet,
        "fingerprint": current,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "versions": installed,
        "platform": platform.platform(),
        "asked": {
            "num_processes": settings.num_processes,
            "num_machines": settings.num_machines,
            "backend": settings.expected_backend,
            "config_file": settings.config_file,
            "extra_args": list(settings.extra_args),
            "memory_limit_mb": settings.memory_limit_mb,
        },
        "environment": ranks_environment(settings),
        "world_size": len(ranks),
        "backend": first.get("backend"),
        "device_per_rank": {rank: (state or {}).get("device") for rank, state in states.items()},
        "distributed_type": first.get("distributed_type"),
        "status": run.status if run else "not run",
        "snippet_seconds": run.seconds if run else None,
        "launch": run.launch if run else {},
        "claims": [
            {
                "id": v.claim,
                "statement": proof.claims[v.claim].says,
                "expected_here": proof.claims[v.claim].holds_on(installed["accelerate"] or "0"),
                "control_removes": proof.claims[v.claim].control,
                "passed": v.passed,
                "by_value": v.by_value,
                "reason": v.reason,
                "reports": [
                    {k: r.get(k) for k in ("rank", "measured", "control", "op", "bound", "details")}
                    for r in sorted(v.reports, key=lambda r: r["rank"])
                ],
            }
            for v in verdicts
        ],
    }
    if mutants is not None:
        found["mutants"] = mutants
    return found


class UnreadableEvidence(UserWarning):
    """An evidence file that is not a whole evidence record (truncated, not JSON): treated as missing."""


def path_of(page: str, snippet: str, evidence_dir: Path = EVIDENCE_DIR) -> Path:
    """Where the evidence of page `page`'s proof by `snippet` lives: one file per (page, snippet), so two
    pages naming one snippet (or a lab and a snippet of the same stem) each keep their own."""
    return evidence_dir / page / f"{Path(snippet).stem}.json"


def write(evidence: dict, evidence_dir: Path = EVIDENCE_DIR) -> Path:
    """Written whole or not at all: a temporary file beside it, then a rename (atomic on one file system),
    so an interrupted run or a reader at the wrong moment never meets half a file. Readable by all, as a
    plain `open()` would leave it (the temporary file is created 0600)."""
    path = path_of(evidence["page"], evidence["snippet"], evidence_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(evidence, indent=1, ensure_ascii=False)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as temporary:
        temporary.write(text)
    os.chmod(temporary.name, 0o666 & ~current_umask())
    os.replace(temporary.name, path)
    return path


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def read_json(path: Path, what: str = "evidence", model=EvidenceRecord) -> dict | None:
    """The record in this file; None, with a warning naming the file, when it is missing, unreadable, or
    not of the shape `model` describes (a hand edit, or a file of an older or newer harness)."""
    if not path.exists():
        return None
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
        model.model_validate(found)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, item['loc'])) or 'record'}: {item['msg']}" for item in error.errors()[:3])
        warnings.warn(f"{path}: unreadable {what} (not the shape of one: {problems}); treated as missing, "
                      "its proof runs again", UnreadableEvidence, stacklevel=2)  # fmt: skip
        return None
    except (OSError, ValueError) as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        warnings.warn(f"{path}: unreadable {what} ({error}); treated as missing, its proof runs again",
                      UnreadableEvidence, stacklevel=2)  # fmt: skip
        return None
    return found


def read(proof: Proof, evidence_dir: Path = EVIDENCE_DIR) -> dict | None:
    """The latest evidence of this page's proof (another page naming the same snippet has its own)."""
    return read_json(path_of(proof.page, proof.snippet, evidence_dir))


def shown(proof: Proof, evidence_dir: Path | None = None, reference_dir: Path | None = None) -> dict | None:
    """What the site shows for a proof: this machine's evidence, else the committed reference evidence
    (marked `"reference": True`; it names its machine). Only the site reads the reference set."""
    found = read(proof, evidence_dir or EVIDENCE_DIR)
    if found is not None:
        return found
    found = read(proof, reference_dir or REFERENCE_EVIDENCE_DIR)
    return {**found, "reference": True} if found is not None else None


def current(proof: Proof) -> dict | None:
    """What the site shows for a proof, or None when there is none or it predates the page's claims."""
    found = shown(proof)
    return found if found and matches_claims(found, proof.claims) else None


def across_releases(proof: Proof, matrix_dir: Path | None = None) -> dict[str, list[dict]]:
    """release -> this proof's claim rows from `python -m verify.matrix`, oldest release first. A folder
    that is not named after a release (a backup copy, a stray folder) is skipped with a warning."""
    from packaging.version import InvalidVersion, Version

    found = {}
    for summary in (matrix_dir or MATRIX_DIR).glob("*/matrix.json"):
        try:
            Version(summary.parent.name)
        except InvalidVersion:
            warnings.warn(f"{summary.parent}: not a release number; skipped", UnreadableEvidence, stacklevel=2)
            continue
        rows = [row for row in (read_json(summary, "matrix summary", MatrixSummary) or {"claims": []})["claims"]
                if row.get("snippet") == proof.snippet and row.get("page", proof.page) == proof.page]  # fmt: skip
        if rows:
            found[summary.parent.name] = rows
    return dict(sorted(found.items(), key=lambda item: Version(item[0])))
