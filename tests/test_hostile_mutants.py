"""A mutant that changes the library without the Patch API, or one that changes nothing, gets the same
verdict in a grouped launch (where it runs after other mutants) as in a launch of its own."""

from pathlib import Path

import pytest

from verify.pages import Claim, Proof
from verify.runner import LaunchSettings
from verify.session import verify

HOSTILE = Path(__file__).parent / "faults" / "hostile" / "snippets"
# The leaky one first: before the fix its tripling stayed in force for the run after it.
MUTANTS = ("linear-tripled-by-assignment", "linear-untouched")


def linear_proof():
    claim = Claim(says="Linear(4, 1) of unit weights on ones is 4", control="zero weights", breaks_when=MUTANTS)
    return Proof(page="hostile", snippet="linear_of_ones.py", claims={"linear_of_ones": claim}, snippets_dir=HOSTILE)


@pytest.fixture(scope="module", params=["grouped", "isolated"])
def mutant_verdicts(request, tmp_path_factory):
    work = tmp_path_factory.mktemp(request.param)
    found = verify([linear_proof()], LaunchSettings(num_processes=2), work, request.param, None, mutants=True)
    return request.param, {key[2]: verdict for key, verdict in found.mutants.items()}


def test_an_assigning_mutant_is_caught_and_a_harmless_one_survives_in_either_mode(mutant_verdicts):
    mode, verdicts = mutant_verdicts
    assert verdicts["linear-tripled-by-assignment"].status == "killed", (mode, verdicts["linear-tripled-by-assignment"])
    harmless = verdicts["linear-untouched"]
    # before: grouped mode measured 12 here (the tripling of the mutant before it) and called it "killed"
    assert harmless.status == "survived", (mode, harmless.reason)
    measured = [report["measured"] for report in harmless.claims["linear_of_ones"]["reports"]]
    assert measured == [4.0, 4.0], (mode, measured)
