"""The machine-readable record of each proof's latest run, read back by the site."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import importlib.metadata
import json
import os
import platform
from pathlib import Path

from verify.pages import REFERENCE_DIR, ROOT, Proof
from verify.runner import LaunchSettings, SnippetRun

HARNESS_DIR = Path(__file__).resolve().parent
# Modules that only build the site: they never change a verdict, so they are no part of a fingerprint.
SITE_MODULES = {"site_hooks.py", "evidence_box.py", "downloads.py", "reference.py", "study.py", "figures.py",
                "lab_pages.py"}  # fmt: skip

# Where `pytest verify` writes and the site reads; a test points both elsewhere.
EVIDENCE_DIR = Path(os.environ.get("VERIFY_EVIDENCE_DIR", ROOT / ".verify" / "evidence"))
# The committed reference set the site falls back on (never read by the harness); a test points it elsewhere.
REFERENCE_EVIDENCE_DIR = Path(os.environ.get("VERIFY_REFERENCE_DIR", REFERENCE_DIR))


def versions() -> dict:
    found = {"python": platform.python_version()}
    for package in ("torch", "accelerate", "transformers"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = None
    return found


def fingerprint(proof: Proof, settings: LaunchSettings) -> str:
    """Everything a verdict depends on: the snippet and the helper modules beside it, the page's claims, the
    installed versions, the launch asked for, and the harness itself. Equal fingerprints, same verdicts."""
    digest = hashlib.sha256()
    helpers = sorted({*proof.path.parent.glob("_*.py"), *proof.snippets_dir.glob("_*.py")})
    harness = [path for path in sorted(HARNESS_DIR.glob("*.py")) if path.name not in SITE_MODULES]
    for path in [proof.path, *helpers, *harness]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    declared = {
        "claims": {claim_id: dataclasses.asdict(claim) for claim_id, claim in proof.claims.items()},
        "versions": versions(),
        "launch": [settings.num_processes, settings.num_machines, settings.expected_backend, settings.config_file,
                   list(settings.extra_args)],
        "requires": proof.requires,
    }  # fmt: skip
    digest.update(json.dumps(declared, sort_keys=True).encode())
    return digest.hexdigest()


def as_declared(claim: dict) -> bool:
    """A recorded claim came out as its page says: it held, or (outside its release range) it did not."""
    return claim["passed"] == claim.get("expected_here", True)


def matches_claims(found: dict, declared: dict) -> bool:
    """The evidence speaks for the claims the page makes now (same ids, same statements)."""
    return {claim["id"] for claim in found["claims"]} == set(declared) and all(
        claim.get("statement") == declared[claim["id"]].says for claim in found["claims"]
    )


def reusable(proof: Proof, settings: LaunchSettings, evidence_dir: Path = EVIDENCE_DIR) -> dict | None:
    """The latest evidence of this proof if nothing it depends on has changed since, and every claim held."""
    found = read(proof.snippet, evidence_dir) if proof.path.exists() else None
    if not found or found.get("fingerprint") != fingerprint(proof, settings):
        return None
    return found if all(as_declared(claim) for claim in found["claims"]) else None


def reused_verdicts(proof: Proof, settings: LaunchSettings, evidence_dir: Path = EVIDENCE_DIR) -> list | None:
    """The verdicts recorded in reusable evidence of this proof, or None when it must run again."""
    from verify.judge import Verdict

    found = reusable(proof, settings, evidence_dir)
    if found is None:
        return None
    return [
        Verdict(proof.page, proof.snippet, claim["id"], claim["passed"], "reused: " + claim["reason"],
                [{**report, "claim": claim["id"]} for report in claim["reports"]])
        for claim in found["claims"]
    ]  # fmt: skip


def record(proof: Proof, run: SnippetRun | None, verdicts: list, settings: LaunchSettings) -> dict:
    ranks = run.ranks if run else {}
    states = {str(rank): outcome.state for rank, outcome in sorted(ranks.items())}
    first = next((state for state in states.values() if state), {}) or {}
    installed = versions()
    return {
        "page": proof.page,
        "snippet": proof.snippet,
        "fingerprint": fingerprint(proof, settings) if proof.path.exists() else None,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "versions": installed,
        "platform": platform.platform(),
        "asked": {
            "num_processes": settings.num_processes,
            "num_machines": settings.num_machines,
            "backend": settings.expected_backend,
        },
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
                "reason": v.reason,
                "reports": [
                    {k: r.get(k) for k in ("rank", "measured", "control", "op", "bound", "details")}
                    for r in sorted(v.reports, key=lambda r: r["rank"])
                ],
            }
            for v in verdicts
        ],
    }


def write(evidence: dict, evidence_dir: Path = EVIDENCE_DIR) -> Path:
    evidence_dir.mkdir(parents=True, exist_ok=True)
    path = evidence_dir / f"{Path(evidence['snippet']).stem}.json"
    path.write_text(json.dumps(evidence, indent=1, ensure_ascii=False))
    return path


def read(snippet: str, evidence_dir: Path = EVIDENCE_DIR) -> dict | None:
    path = evidence_dir / f"{Path(snippet).stem}.json"
    return json.loads(path.read_text()) if path.exists() else None


def shown(snippet: str, evidence_dir: Path | None = None, reference_dir: Path | None = None) -> dict | None:
    """What the site shows for a snippet: this machine's evidence, else the committed reference evidence
    (marked `"reference": True`; it names its machine). Only the site reads the reference set."""
    found = read(snippet, evidence_dir or EVIDENCE_DIR)
    if found is not None:
        return found
    found = read(snippet, reference_dir or REFERENCE_EVIDENCE_DIR)
    return {**found, "reference": True} if found is not None else None


def across_releases(snippet: str, matrix_dir: Path | None = None) -> dict[str, list[dict]]:
    """release -> this snippet's claim rows from `python -m verify.matrix`, oldest release first."""
    from packaging.version import Version

    from verify.matrix import MATRIX_DIR

    found = {}
    for summary in (matrix_dir or MATRIX_DIR).glob("*/matrix.json"):
        rows = [row for row in json.loads(summary.read_text())["claims"] if row["snippet"] == snippet]
        if rows:
            found[summary.parent.name] = rows
    return dict(sorted(found.items(), key=lambda item: Version(item[0])))
