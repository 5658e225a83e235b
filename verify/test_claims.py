"""One test per claim: `pytest verify -k data-parallel-accuracy` runs one page's proofs."""

import pytest

from verify.session import skip_reason


def test_claim(claim, verdicts, settings):
    proof, claim_id = claim
    if claim_id is None:  # a page whose front matter could not be read
        pytest.fail(proof.error, pytrace=False)
    reason = skip_reason(proof, settings)
    if reason:
        pytest.skip(reason)
    verdict = verdicts[(proof.page, proof.snippet, claim_id)]
    assert verdict.passed, verdict.reason
