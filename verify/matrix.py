"""Run the proofs against other Accelerate releases, with the same torch, and check the claims' version ranges.

    python -m verify.matrix 0.17.1 0.27.2 0.34.2 1.0.1 1.15.0        # the proofs with version statements
    python -m verify.matrix --all 0.34.2 1.15.0                       # every proof, each release
    python -m verify.matrix --all 0.34.2 -k gradient-accumulation     # one page

By default it runs the proofs that make a version statement (a claim with `since:` or `until:`);
`--all` runs every proof. Each release is installed once, without dependencies, into `.verify/releases/accelerate-X` (torch stays
the pinned one) and put first on the path of the harness and of every launched rank. The release that is
installed in the environment runs as it is. Evidence of each release goes to `.verify/matrix/X/`.

A claim may declare `since:` / `until:` (see docs/how-pages-are-proven.md). The matrix fails when a claim
holds outside its range or does not hold inside it. A proof that cannot run on a release (it imports or
calls an API that release does not have) is reported as such. Claims without a range make no statement
about other releases: their results are shown, not judged.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.version import InvalidVersion, Version

from verify.evidence import read as read_evidence
from verify.pages import Claim
from verify.paths import MATRIX_DIR, RELEASES_DIR, ROOT, RUNS_DIR

# A crash with one of these means the proof uses an API the release does not have.
MISSING_API = re.compile(r"^(ImportError|ModuleNotFoundError|AttributeError|TypeError: .*unexpected keyword)", re.M)


def pinned_release() -> str:
    return importlib.metadata.version("accelerate")


def release_dir(release: str) -> Path | None:
    """The folder holding this release (installed once), or None for the release installed here."""
    if release == pinned_release():
        return None
    target = RELEASES_DIR / f"accelerate-{release}"
    if not (target / "accelerate").is_dir():
        wanted = [f"accelerate=={release}"]
        if Version(release) < Version("0.20"):
            wanted.append("setuptools<81")  # those releases import pkg_resources, gone from setuptools 81
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), *wanted],
            check=True,
        )
    return target


def in_range(release: str, since: str | None, until: str | None) -> bool:
    return Claim(says="", since=since, until=until).holds_on(release)


def outcome(claim: dict, evidence: dict) -> str:
    """holds | fails (measured, and missed) | cannot run (the release lacks an API the proof uses) |
    launch failed | crashed, hung, not reported: no measurement, which agrees with no range."""
    if claim["passed"]:
        return "holds"
    if evidence["status"] == "launch_failed":
        return "launch failed"  # the release itself did not start: a broken environment, never a verdict
    if evidence["status"] == "crashed" and MISSING_API.search(claim["reason"]):
        return "cannot run"
    if claim.get("by_value", evidence["status"] == "finished" and bool(claim.get("reports"))):
        return "fails"
    if evidence["status"] == "finished":
        return "not reported"
    return evidence["status"] if evidence["status"] in ("crashed", "hung") else "did not run"


def judge_release(release: str, proofs: list, evidence_dir: Path) -> list[dict]:
    """One row per claim: its outcome on this release and whether that agrees with its declared range."""
    rows = []
    for proof in proofs:
        evidence = read_evidence(proof, evidence_dir)  # unreadable: as if not run, with a warning
        for claim_id, claim in proof.claims.items():
            recorded = next((c for c in (evidence or {}).get("claims", []) if c["id"] == claim_id), None)
            result = outcome(recorded, evidence) if recorded else "not run"
            ranged = claim.since is not None or claim.until is not None
            expected = in_range(release, claim.since, claim.until)
            if result == "launch failed":
                verdict = result  # the release itself did not start: always a failure of the matrix
            elif not ranged:
                verdict = "shown"  # no version statement to check (skipped proofs included)
            elif result == "not run":
                verdict = result
            elif expected:
                verdict = "agrees" if result == "holds" else f"{result} inside its range"
            elif result in ("fails", "cannot run"):
                verdict = "agrees"  # measured and missed, or the API it needs does not exist yet / any more
            else:
                verdict = "holds outside its range" if result == "holds" else f"{result} outside its range"
            rows.append(
                {"page": proof.page, "snippet": proof.snippet, "claim": claim_id, "since": claim.since,
                 "until": claim.until, "outcome": result, "verdict": verdict,
                 "reason": recorded["reason"] if recorded and not recorded["passed"] else None}
            )  # fmt: skip
    return rows


def run_release(release: str, selection: str | None, nproc: int, pinned: bool, everything: bool) -> None:
    """In a process of its own: the release first on the path, then the suite, then the judgement."""
    from verify.pages import all_proofs, load_pages
    from verify.runner import LaunchSettings
    from verify.session import verify_proofs

    from verify.evidence import EVIDENCE_DIR

    proofs = [p for p in all_proofs(load_pages()) if not selection or re.search(selection, f"{p.page} {p.snippet}")]
    if not everything:  # by default the proofs that make version statements: the ones the matrix judges
        proofs = [p for p in proofs if any(c.since or c.until for c in p.claims.values())]
    # The installed release shares `pytest verify`'s evidence, reused wherever nothing changed since.
    # (The parent decides which release is installed: in here the release on the path is the one seen.)
    evidence_dir = EVIDENCE_DIR if pinned else MATRIX_DIR / release
    runs = RUNS_DIR
    runs.mkdir(parents=True, exist_ok=True)
    work_dir = Path(tempfile.mkdtemp(prefix=f"matrix-{release}-", dir=runs))  # reports append: never reuse one
    verify_proofs(proofs, LaunchSettings(num_processes=nproc), work_dir, "grouped", evidence_dir, reuse_evidence=pinned)
    rows = judge_release(release, proofs, evidence_dir)
    (MATRIX_DIR / release).mkdir(parents=True, exist_ok=True)
    (MATRIX_DIR / release / "matrix.json").write_text(json.dumps({"release": release, "claims": rows}, indent=1))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("releases", nargs="+", help="Accelerate releases, e.g. 0.17.1 1.0.1 1.15.0")
    parser.add_argument("-k", dest="selection", help="a regular expression on 'page snippet'")
    parser.add_argument(
        "--all", dest="everything", action="store_true",
        help="every proof, not only those with a version-ranged claim (old releases lack many APIs: slow)",
    )  # fmt: skip
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--run-release", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pinned", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.run_release:  # the child: its path already starts with the release
        run_release(args.releases[0], args.selection, args.nproc, args.pinned, args.everything)
        return 0

    not_releases = [release for release in args.releases if not is_release(release)]
    if not_releases:  # checked before anything runs: a typo must not cost the releases before it
        parser.error(f"not release numbers: {', '.join(not_releases)} (e.g. 1.15.0)")
    if args.selection is not None:
        try:
            re.compile(args.selection)
        except re.error as error:  # the children would each die on it, after their release was installed
            parser.error(f"-k {args.selection!r} is not a regular expression: {error}")

    failures, broken = 0, []
    for release in args.releases:
        try:
            folder = release_dir(release)
        except subprocess.CalledProcessError as error:
            broken.append(f"accelerate {release}: could not be installed ({error})")
            continue
        env = dict(os.environ)
        if folder is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(folder), str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        command = [sys.executable, "-m", "verify.matrix", release, "--run-release", "--nproc", str(args.nproc)]
        if args.selection:
            command += ["-k", args.selection]
        if folder is None:
            command.append("--pinned")
        if args.everything:
            command.append("--all")
        summary = MATRIX_DIR / release / "matrix.json"
        summary.unlink(missing_ok=True)  # a summary left by an earlier run must not stand for this one
        finished, stopped = run_child(command, env)
        if stopped:
            broken.append(f"accelerate {release}: stopped by a signal; the releases after it were not run")
            break
        if finished != 0 or not summary.exists():  # one failing release does not stop the others
            broken.append(f"accelerate {release}: its run failed (exit code {finished}); see the output above")
            continue
        rows = json.loads(summary.read_text())["claims"]
        counts = {kind: sum(row["outcome"] == kind for row in rows) for kind in ("holds", "fails", "cannot run")}
        wrong = [row for row in rows if row["verdict"] not in ("agrees", "shown")]
        ranged = sum(row["since"] is not None or row["until"] is not None for row in rows)
        print(
            f"accelerate {release}: {counts['holds']} hold, {counts['fails']} fail, {counts['cannot run']} cannot run; "
            f"{sum(row['verdict'] == 'agrees' for row in rows)}/{ranged} version-ranged claims agree with their range"
        )
        for row in wrong:
            print(f"  MISMATCH {row['page']}::{row['claim']} ({row['snippet']}, since {row['since']}, "
                  f"until {row['until']}): {row['verdict']}")  # fmt: skip
        failures += len(wrong)
    if broken:
        print(f"{len(broken)} of {len(args.releases)} release(s) did not run to the end:")
        for line in broken:
            print(f"  {line}")
    return 1 if failures or broken else 0


def run_child(command: list, env: dict) -> tuple[int, bool]:
    """One release's run in a process of its own: (exit code, whether a signal stopped it). SIGTERM or
    SIGHUP sent to this process is passed on, so that the child kills its launches before it ends."""
    child = subprocess.Popen(command, env=env, cwd=ROOT)
    stopped = []

    def pass_on(signum, frame):
        stopped.append(signum)
        child.send_signal(signal.SIGTERM)

    previous = {signum: signal.signal(signum, pass_on) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return child.wait(), bool(stopped)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def is_release(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
