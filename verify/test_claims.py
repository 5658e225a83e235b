"""One test per claim: `pytest verify -k data-parallel-accuracy` runs one page's proofs."""

import importlib.metadata

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
    declared, release = proof.claims[claim_id], importlib.metadata.version("accelerate")
    if not declared.holds_on(release):  # a version statement: outside its releases the claim must not hold
        assert verdict.by_value, (
            f"{verdict.reason}\nthe page says it holds only for accelerate {declared.since or 'any'} to "
            f"{declared.until or 'now'}; on {release} it must be measured and not hold, and a crash or a "
            "missing report measures nothing"
        )
        assert not verdict.passed, (
            f"{verdict.reason}\nbut the page says it holds only for accelerate {declared.since or 'any'} to "
            f"{declared.until or 'now'}, and this is {release}"
        )
        pytest.xfail(f"does not hold on accelerate {release}, as declared ({declared.since or 'any'} to {declared.until or 'now'})")
    assert verdict.passed, verdict.reason


def test_mutant(mutant_case, mutant_verdicts, settings):
    """`pytest verify --mutants`: the claim must FAIL, by its value, in the world the mutant makes."""
    proof, claim_id, name = mutant_case
    reason = skip_reason(proof, settings)
    if reason:
        pytest.skip(reason)
    verdict = mutant_verdicts[(proof.page, proof.snippet, name)]
    assert verdict.status in ("killed", "survived", "not_reported"), verdict.reason
    found = verdict.claims.get(claim_id, {})
    assert found.get("killed"), f"{verdict.reason}\nclaim {claim_id}: {found.get('how', 'not judged')}"


def test_mutant_catalogue():
    """Every snippets/*/_mutants.py loads: one that raises fails here, by name, and in --mutants the proofs
    naming its mutants; every other proof runs and is judged as usual."""
    from verify import mutation

    problems = mutation.problems()
    assert not problems, "\n".join(problems)
