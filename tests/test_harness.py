"""The harness must fail each deliberately broken snippet for its own reason, and leave nothing behind."""

from pathlib import Path

import psutil

from tests.conftest import broken_proofs
from verify.runner import LaunchSettings
from verify.session import verify_proofs

def processes_under(folder: Path) -> list:
    """Launchers and ranks whose command line names this run's folder (the manifest lives there)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(str(folder) in part for part in process.info["cmdline"] or []):
            found.append(process)
    return found


def verdict_of(verdicts, page, claim):
    """The one verdict for this page's claim id (a page declares each id once)."""
    (found,) = [verdict for (p, _, c), verdict in verdicts.items() if (p, c) == (page, claim)]
    return found


def reason(grouped, page, claim):
    verdict = verdict_of(grouped[0], page, claim)
    assert not verdict.passed, f"{claim} should fail"
    return verdict.reason


def test_healthy_snippets_pass_before_and_after_failures_in_the_same_group(grouped):
    assert verdict_of(grouped[0], "broken", "sum_of_ranks").passed
    assert verdict_of(grouped[0], "broken", "mean_of_ones").passed
    assert verdict_of(grouped[0], "after_failures", "sum_of_ranks_again").passed


def test_a_false_claim_fails_with_its_measurement(grouped):
    assert "rank 0: measured 1.0, expected <= 0.1" in reason(grouped, "broken", "error_is_small")


def test_a_control_that_does_not_break_fails(grouped):
    assert "the check cannot fail" in reason(grouped, "broken", "cannot_fail")


def test_an_undeclared_claim_fails_the_snippet(grouped):
    assert "does not declare: ['surprise']" in reason(grouped, "broken", "declared")


def test_a_declared_claim_that_is_not_reported_fails(grouped):
    assert verdict_of(grouped[0], "broken", "reported").passed
    assert "no rank reported it" in reason(grouped, "broken", "promised")


def test_a_crash_on_rank_1_shows_that_ranks_traceback(grouped):
    text = reason(grouped, "broken", "never_reached")
    assert "page broken, snippet crash_on_rank1.py" in text
    assert "rank 1 raised" in text and "ValueError: rank 1 fails on purpose" in text
    assert "rank 0 raised" not in text


def test_a_deadlock_fails_within_its_limit_names_the_waiting_rank_and_leaves_no_process(grouped):
    text = reason(grouped, "broken", "never_reached_either")
    assert "did not finish within 10 s on rank(s) [0]" in text
    assert "deadlock.py" in text  # rank 0's stack, dumped before the kill, points at the recv
    assert processes_under(grouped[1]) == []


def test_a_page_naming_a_missing_snippet_fails(grouped):
    assert "does not exist" in reason(grouped, "broken", "ghost")


def test_one_process_when_two_were_asked_is_a_failure(tmp_path):
    # `accelerate launch --cpu --num_processes 2` starts a single process; the claim itself would hold.
    blind = [p for p in broken_proofs() if p.snippet == "world_size_blind.py"]
    settings = LaunchSettings(num_processes=2, extra_args=("--cpu",), use_cpu=True)
    verdict = verdict_of(verify_proofs(blind, settings, tmp_path, "grouped", None), "broken", "mean_of_ones")
    assert not verdict.passed
    assert "asked for 2 processes, ranks [0] ran (1 process(es))" in verdict.reason


def test_two_proofs_reporting_one_claim_id_are_judged_apart(grouped):
    verdicts = grouped[0]
    assert not verdicts[("duplicate", "zz_false.py", "same")].passed
    assert "rank 0: measured 1.0, expected <= 0.5" in verdicts[("duplicate", "zz_false.py", "same")].reason
    assert verdicts[("duplicate", "zz_true.py", "same")].passed


def test_two_nodes_meet_on_loopback_with_a_launch_per_machine_rank(tmp_path):
    # What `pytest verify --nnodes 2` does: two `accelerate launch` processes, machine ranks 0 and 1.
    healthy = [p for p in broken_proofs() if p.snippet == "passing_claim.py"]
    settings = LaunchSettings(num_processes=2, num_machines=2, use_cpu=True)
    verdict = verdict_of(verify_proofs(healthy, settings, tmp_path, "grouped", None), "broken", "sum_of_ranks")
    assert verdict.passed, verdict.reason
    # the judge checked each rank's node (GROUP_RANK) and LOCAL_RANK; both machines' ranks reported
    assert sorted(report["rank"] for report in verdict.reports) == [0, 1]
    assert (tmp_path / "nproc-2-nnodes-2").is_dir()
