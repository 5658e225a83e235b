"""Defect 1: outside its releases a claim must be measured and not hold; a crash or a missing report
is no measurement, so it never confirms a version statement (pytest verify, reuse, the matrix)."""

import json

import pytest

from tests.conftest import BROKEN
from verify import evidence
from verify.judge import judge
from verify.matrix import judge_release
from verify.pages import Claim, Proof
from verify.runner import LaunchSettings, RankOutcome, SnippetRun
from verify.test_claims import test_claim as run_claim_test

SETTINGS = LaunchSettings(num_processes=2, use_cpu=True)
OLD_ONLY = Proof(page="p", snippet="passing_claim.py", snippets_dir=BROKEN / "snippets",
                 claims={"old_behaviour": Claim(says="held until 1.0", control="c", until="1.0.0")})  # fmt: skip
STATE = {"torch_world_size": 2, "backend": "gloo"}


def crashed_run():
    ranks = {rank: RankOutcome(rank=rank, traceback="ValueError: before any report") for rank in (0, 1)}
    return SnippetRun("passing_claim", "x", "crashed", ranks, "rank 0 raised:\nValueError: before any report")


def silent_run():
    ranks = {rank: RankOutcome(rank=rank, state={**STATE, "torch_rank": rank}, finished=True) for rank in (0, 1)}
    return SnippetRun("passing_claim", "x", "finished", ranks, None, 0.1)


@pytest.mark.parametrize("run", [crashed_run, silent_run], ids=["crash", "no-report"])
def test_no_measurement_outside_the_range_is_a_failure_not_an_expected_failure(run):
    (verdict,) = judge(OLD_ONLY, run(), SETTINGS)
    assert not verdict.passed and not verdict.by_value
    verdicts = {("p", "passing_claim.py", "old_behaviour"): verdict}
    with pytest.raises(AssertionError, match="measures nothing"):  # before: pytest.xfail, "as declared"
        run_claim_test((OLD_ONLY, "old_behaviour"), verdicts, SETTINGS)


@pytest.mark.parametrize("run", [crashed_run, silent_run], ids=["crash", "no-report"])
def test_crashed_evidence_is_not_as_declared_and_is_not_reused(tmp_path, run):
    found = evidence.record(OLD_ONLY, run(), judge(OLD_ONLY, run(), SETTINGS), SETTINGS)
    assert found["claims"][0]["expected_here"] is False
    assert not evidence.as_declared(found["claims"][0])
    evidence.write(found, tmp_path)
    assert evidence.reusable(OLD_ONLY, SETTINGS, tmp_path) is None


def test_a_measured_miss_outside_the_range_is_as_declared():
    ranks = {rank: RankOutcome(rank=rank, state={**STATE, "torch_rank": rank}, finished=True,
                               reports=[{"claim": "old_behaviour", "rank": rank, "measured": 1.0, "control": 1.0,
                                         "op": "<=", "bound": 0.5, "passed": False}]) for rank in (0, 1)}  # fmt: skip
    (verdict,) = judge(OLD_ONLY, SnippetRun("passing_claim", "x", "finished", ranks, None, 0.1), SETTINGS)
    assert verdict.by_value and not verdict.passed
    with pytest.raises(pytest.xfail.Exception):
        run_claim_test((OLD_ONLY, "old_behaviour"), {("p", "passing_claim.py", "old_behaviour"): verdict}, SETTINGS)


def test_the_matrix_never_counts_a_crash_or_a_missing_report_as_agreement(tmp_path):
    proof = Proof(page="p", snippet="s.py", snippets_dir=tmp_path,
                  claims={"old_behaviour": Claim(says="x", control="c", until="1.0.0")})  # fmt: skip
    for status, reason, reports in [("crashed", "crashed: rank 0 raised:\nValueError: boom", []),
                                    ("finished", "no rank reported it", []), ("hung", "hung: did not finish", [])]:
        folder = tmp_path / status
        (folder / "p").mkdir(parents=True)
        claim = {"id": "old_behaviour", "passed": False, "reason": reason, "reports": reports}
        (folder / "p" / "s.json").write_text(json.dumps({"status": status, "claims": [claim]}))
        (row,) = judge_release("1.15.0", [proof], folder)
        assert row["verdict"] != "agrees", (status, row)
