"""The machine-readable record of each proof's latest run, read back by the site."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
from pathlib import Path

from verify.pages import ROOT, Proof
from verify.runner import LaunchSettings, SnippetRun

# Where `pytest verify` writes and the site reads; a test points both elsewhere.
EVIDENCE_DIR = Path(os.environ.get("VERIFY_EVIDENCE_DIR", ROOT / ".verify" / "evidence"))


def versions() -> dict:
    found = {"python": platform.python_version()}
    for package in ("torch", "accelerate", "transformers"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = None
    return found


def record(proof: Proof, run: SnippetRun | None, verdicts: list, settings: LaunchSettings) -> dict:
    ranks = run.ranks if run else {}
    states = {str(rank): outcome.state for rank, outcome in sorted(ranks.items())}
    first = next((state for state in states.values() if state), {}) or {}
    return {
        "page": proof.page,
        "snippet": proof.snippet,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "versions": versions(),
        "platform": platform.platform(),
        "asked": {"num_processes": settings.num_processes, "backend": settings.expected_backend},
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
