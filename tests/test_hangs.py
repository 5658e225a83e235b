"""The proofs that make processes hang on purpose end within their limits and leave no process behind."""

import pytest

from tests.test_harness import processes_under
from verify.pages import load_pages, question_pages
from verify.runner import LaunchSettings
from verify.session import verify_proofs

HANG_PROOFS = [proof for page in question_pages(load_pages()) if page.topic == "failures" for proof in page.proofs]


@pytest.mark.skipif(not HANG_PROOFS, reason="no page under docs/questions/failures/ yet")
def test_hang_proofs_pass_within_their_limits_and_leave_no_process(tmp_path):
    verdicts = verify_proofs(HANG_PROOFS, LaunchSettings(num_processes=2), tmp_path, "grouped", None)
    failed = {key: verdict.reason for key, verdict in verdicts.items() if not verdict.passed}
    assert failed == {}
    # a forked child keeps its parent's command line, which names this run's folder
    assert processes_under(tmp_path) == []
