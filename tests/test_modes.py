"""Verdicts must not depend on how snippets share launches."""

import re

from tests.conftest import broken_proofs
from verify.runner import LaunchSettings
from verify.session import verify_proofs


def kind(verdict) -> str:
    """The verdict and its reason, without what differs from run to run (paths, numbers, times)."""
    if verdict.passed:
        return "passed"
    for cause in ("crashed", "hung", "launch_failed", "does not exist", "no rank reported", "cannot fail",
                  "does not declare", "expected", "asked for"):  # fmt: skip
        if cause in verdict.reason:
            return cause
    return re.sub(r"\d+(\.\d+)?", "N", verdict.reason)


def test_grouped_and_isolated_runs_give_the_same_verdicts(grouped, tmp_path):
    isolated = verify_proofs(broken_proofs(), LaunchSettings(num_processes=2), tmp_path, "isolated", None)
    assert set(isolated) == set(grouped[0])
    assert {key: kind(v) for key, v in isolated.items()} == {key: kind(v) for key, v in grouped[0].items()}
    # and the suite exercises both outcomes, so the comparison can fail
    assert {"passed", "crashed", "hung"} <= {kind(v) for v in isolated.values()}
