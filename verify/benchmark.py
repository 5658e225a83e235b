"""Times the whole proof suite run both ways, one after the other, on this machine.

    python -m verify.benchmark            # grouped, grouped with every mutant, then isolated
    python -m verify.benchmark --nproc 2
    python -m verify.benchmark --no-isolated   # skip the slow reference (about 10 minutes here)
    python -m verify.benchmark --only print-and-log-once,what-zero-shards --isolated-mutants
                                               # those pages only, and their mutants run isolated as well

Not a timed test: wall times depend on the machine. It also checks that both modes agree.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from verify.pages import all_proofs, load_pages
from verify.runner import LaunchSettings
from verify.mutation import named_mutants
from verify.session import skip_reason, verify, verify_proofs


def import_floor(repeats: int = 3) -> float:
    """Seconds for one fresh process to import torch and accelerate: what every launch pays per rank."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch, accelerate"], check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def timed(proofs, settings, mode, work_dir):
    started = time.perf_counter()
    verdicts = verify_proofs(proofs, settings, work_dir, mode, evidence_dir=None)
    return time.perf_counter() - started, verdicts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--no-isolated", action="store_true", help="skip the isolated reference run")
    parser.add_argument("--isolated-mutants", action="store_true",
                        help="run every mutant isolated too (one launch per mutant run) and compare those verdicts")
    parser.add_argument("--only", default="", help="comma-separated page slugs: time those pages' proofs only")
    args = parser.parse_args(argv)
    settings = LaunchSettings(num_processes=args.nproc)
    proofs = [p for p in all_proofs(load_pages()) if not skip_reason(p, settings)]
    if args.only:
        wanted = set(args.only.split(","))
        proofs = [p for p in proofs if p.page in wanted]
        if not proofs:
            parser.error(f"--only {args.only}: no proof on those pages")
    snippets = len({p.snippet for p in proofs})
    claims = sum(len(p.claims) for p in proofs)
    print(f"{snippets} snippets, {claims} claims, {args.nproc} processes, backend {settings.expected_backend}")
    floor = import_floor()
    print(f"floor: importing torch + accelerate in one process takes {floor:.2f} s")
    with tempfile.TemporaryDirectory() as work:
        grouped_s, grouped = timed(proofs, settings, "grouped", Path(work) / "grouped")
        print(f"grouped : {grouped_s:7.1f} s  ({grouped_s / snippets:.2f} s per snippet)", flush=True)
        runs = sum(len(named_mutants(p)) for p in proofs)
        started = time.perf_counter()
        mutated = verify(proofs, settings, Path(work) / "mutants", "grouped", evidence_dir=None, mutants=True)
        mutants_s = time.perf_counter() - started
        killed = sum(v.status == "killed" for v in mutated.mutants.values())
        print(f"mutants : {mutants_s:7.1f} s  (plain runs and {runs} mutant runs in grouped launches; "
              f"{killed}/{len(mutated.mutants)} mutants caught by every claim naming them)", flush=True)
        if args.no_isolated:
            return 0
        isolated_s, isolated = timed(proofs, settings, "isolated", Path(work) / "isolated")
        print(f"isolated: {isolated_s:7.1f} s  ({isolated_s / snippets:.2f} s per snippet)", flush=True)
        mutants_agree = True
        if args.isolated_mutants:
            started = time.perf_counter()
            alone = verify(proofs, settings, Path(work) / "mutants-isolated", "isolated", evidence_dir=None, mutants=True)
            print(f"mutants isolated: {time.perf_counter() - started:7.1f} s  ({runs} mutant runs, one launch each)")
            grouped_mutants = {key: verdict.status for key, verdict in mutated.mutants.items()}
            isolated_mutants = {key: verdict.status for key, verdict in alone.mutants.items()}
            mutants_agree = grouped_mutants == isolated_mutants
            for key in sorted(set(grouped_mutants) | set(isolated_mutants)):
                if grouped_mutants.get(key) != isolated_mutants.get(key):
                    print(f"  differs: {key}: grouped {grouped_mutants.get(key)}, isolated {isolated_mutants.get(key)}")
            print(f"mutant verdicts: {killed}/{len(grouped_mutants)} caught; both modes agree: {mutants_agree}")
    print(f"ratio   : grouped is {isolated_s / grouped_s:.1f}x faster than isolated")
    same = {k: v.passed for k, v in grouped.items()} == {k: v.passed for k, v in isolated.items()}
    passed = sum(v.passed for v in grouped.values())
    print(f"verdicts: {passed}/{len(grouped)} claims pass; both modes agree: {same}")
    return 0 if same and mutants_agree else 1


if __name__ == "__main__":
    sys.exit(main())
