"""Run the proofs against other Accelerate releases, with the same torch, and check the claims' version ranges.

    python -m verify.matrix 0.17.1 0.27.2 0.34.2 1.0.1 1.15.0        # the proofs with version statements
    python -m verify.matrix --all 0.34.2 1.15.0                       # every proof, each release
    python -m verify.matrix --all 0.34.2 -k gradient-accumulation     # one page
    python -m verify.matrix --edges                                   # every range, at both of its edges

`--edges` runs each version-ranged claim on the release at each edge of its range and on the release just
outside it (`since: 0.23.0`: on 0.23.0 and on 0.22.0; `until: 1.8.1`: on 1.8.1 and on 1.9.0), taking the
neighbours from data/accelerate-releases.txt, each release running only the proofs with an edge there.
It prints one line per claim and edge; an edge that could not be run (the release does not install or
start here) is "unchecked", never agreement, and fails the run like a mismatch.

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
from verify.paths import MATRIX_DIR, RELEASE_LIST, RELEASES_DIR, ROOT, RUNS_DIR

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
        pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
        subprocess.run([*pip, f"accelerate=={release}"], check=True)
        if imports_pkg_resources(target / "accelerate"):  # gone from setuptools 81; such releases need an older one
            subprocess.run([*pip, "--upgrade", "setuptools<81"], check=True)
    return target


def imports_pkg_resources(package: Path) -> bool:
    return any("import pkg_resources" in path.read_text(errors="replace") for path in package.rglob("*.py"))


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


def known_releases() -> list[str]:
    lines = (line.strip() for line in RELEASE_LIST.read_text().splitlines())
    return sorted((line for line in lines if line and not line.startswith("#")), key=Version)


def claim_edges(since: str | None, until: str | None, releases: list[str]) -> list[tuple[str, bool]]:
    """(release, inside the range) for each edge of a range and the release just outside it; an edge
    with no release beyond it (a range that reaches the first or the newest release) has none."""
    edges = []
    ordered = [Version(release) for release in releases]
    if since is not None:
        edges.append((since, True))
        before = [release for release, version in zip(releases, ordered) if version < Version(since)]
        if before:
            edges.append((before[-1], False))
    if until is not None:
        edges.append((until, True))
        after = [release for release, version in zip(releases, ordered) if version > Version(until)]
        if after:
            edges.append((after[0], False))
    return edges


def edge_plan(selection: str | None) -> dict[str, list]:
    """release -> the ranged proofs that have an edge on it, and the (proof, claim, inside) to judge there."""
    from verify.pages import all_proofs, load_pages

    releases = known_releases()
    plan: dict[str, list] = {}
    for proof in all_proofs(load_pages()):
        if selection and not re.search(selection, f"{proof.page} {proof.snippet}"):
            continue
        for claim_id, claim in proof.claims.items():
            if claim.since is None and claim.until is None:
                continue
            for release, inside in claim_edges(claim.since, claim.until, releases):
                plan.setdefault(release, []).append((proof, claim_id, inside))
    return dict(sorted(plan.items(), key=lambda item: Version(item[0])))


def edge_report(plan: dict[str, list], broken_releases: dict[str, str]) -> list[str]:
    """One line per claim and edge; returns the lines that are not agreement (mismatch or unchecked)."""
    bad = []
    for release, entries in plan.items():
        summary = MATRIX_DIR / release / "matrix.json"
        rows = {} if release in broken_releases or not summary.exists() else {
            (row["page"], row["snippet"], row["claim"]): row for row in json.loads(summary.read_text())["claims"]
        }  # fmt: skip
        for proof, claim_id, inside in entries:
            row = rows.get((proof.page, proof.snippet, claim_id))
            side = "inside" if inside else "just outside"
            if row is None:
                why = broken_releases.get(release, "no result recorded")
                line = f"UNCHECKED {proof.page}::{claim_id} on {release} ({side} its range): {why}"
            elif row["verdict"] == "agrees":
                print(f"  edge ok   {proof.page}::{claim_id} on {release} ({side} its range): {row['outcome']}")
                continue
            else:
                line = f"MISMATCH  {proof.page}::{claim_id} on {release} ({side} its range): {row['verdict']}"
            print(f"  {line}")
            bad.append(line)
    return bad


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("releases", nargs="*", help="Accelerate releases, e.g. 0.17.1 1.0.1 1.15.0")
    parser.add_argument(
        "--edges", action="store_true",
        help="also run every version-ranged claim at each edge of its range and just outside it",
    )  # fmt: skip
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
    if not args.releases and not args.edges:
        parser.error("name at least one release, or --edges")
    if args.selection is not None:
        try:
            re.compile(args.selection)
        except re.error as error:  # the children would each die on it, after their release was installed
            parser.error(f"-k {args.selection!r} is not a regular expression: {error}")

    plan = edge_plan(args.selection) if args.edges else {}
    # each edge release runs only the proofs with an edge on it; a release also named plainly runs as asked
    selections = {release: args.selection for release in args.releases}
    for release, entries in plan.items():
        if release not in selections:
            snippets = sorted({re.escape(proof.snippet) for proof, _, _ in entries})
            selections[release] = "|".join(snippets)

    failures, broken, broken_releases = 0, [], {}
    for release, selection in selections.items():
        try:
            folder = release_dir(release)
        except subprocess.CalledProcessError as error:
            broken.append(f"accelerate {release}: could not be installed ({error})")
            broken_releases[release] = "the release could not be installed"
            continue
        env = dict(os.environ)
        if folder is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(folder), str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        command = [sys.executable, "-m", "verify.matrix", release, "--run-release", "--nproc", str(args.nproc)]
        if selection:
            command += ["-k", selection]
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
            broken_releases[release] = f"its run failed (exit code {finished})"
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
    edge_problems = []
    if plan:
        edges = sum(len(entries) for entries in plan.values())
        print(f"Range edges: {edges} (claim, release) pairs on {len(plan)} releases")
        edge_problems = edge_report(plan, broken_releases)
        print(f"Range edges: {edges - len(edge_problems)} of {edges} agree; {len(edge_problems)} mismatch or unchecked")
    if broken:
        print(f"{len(broken)} of {len(selections)} release(s) did not run to the end:")
        for line in broken:
            print(f"  {line}")
    return 1 if failures or broken or edge_problems else 0


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
