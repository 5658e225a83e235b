"""Mutants: a claim must fail by its value in the world its mutant makes, and a mutant never leaks."""

import importlib.metadata
import re
import types
from pathlib import Path

import pytest

from verify.evidence import read
from verify.judge import judge
from verify.mutation import MutantError, Patch, catalogue, mutants_in
from verify.pages import Claim, Proof, all_proofs, load_pages
from verify.runner import LaunchSettings, SnippetSpec, run_snippets
from verify.session import verify
from verify.website.evidence_box import MUTANT_MARKER

SNIPPETS = Path(__file__).parent / "mutants" / "snippets"
MUTANTS = ["all-reduce-takes-the-max", "all-reduce-unchanged", "broadcast-does-nothing", "no-such-mutant",
           "all-reduce-raises"]


def sum_proof(*mutants):
    claim = Claim(says="1 + 2 = 3", control="no all-reduce", breaks_when=tuple(mutants))
    return Proof(page="sums", snippet="sum_of_ranks.py", claims={"sum_of_ranks": claim}, snippets_dir=SNIPPETS)


@pytest.fixture(scope="module")
def mutated(tmp_path_factory):
    """One grouped launch: the plain run, then one run per mutant (a crashing one ends its launch)."""
    work = tmp_path_factory.mktemp("mutants")
    return verify([sum_proof(*MUTANTS)], LaunchSettings(num_processes=2), work, evidence_dir=work / "evidence",
                  mutants=True), work  # fmt: skip


def outcome(mutated, name):
    return mutated[0].mutants[("sums", "sum_of_ranks.py", name)]


def test_the_plain_run_passes_beside_its_mutants(mutated):
    assert mutated[0].verdicts[("sums", "sum_of_ranks.py", "sum_of_ranks")].passed


def test_the_evidence_keeps_each_mutant_run(mutated):
    recorded = {entry["mutant"]: entry for entry in read(sum_proof(), mutated[1] / "evidence")["mutants"]}
    assert recorded.keys() == set(MUTANTS)
    killed = recorded["all-reduce-takes-the-max"]
    assert killed["status"] == "killed" and killed["reached_ranks"] == [0, 1]
    assert killed["describes"] == "all_reduce returns the largest value instead of the sum"
    assert killed["claims"][0]["id"] == "sum_of_ranks" and killed["claims"][0]["reports"][0]["measured"] == 2.0


def test_a_mutant_that_changes_the_value_is_caught(mutated):
    found = outcome(mutated, "all-reduce-takes-the-max")
    assert found.status == "killed" and found.caught("sum_of_ranks"), found.reason
    assert found.claims["sum_of_ranks"]["how"] == "measured missed the bound"
    assert [r["measured"] for r in found.claims["sum_of_ranks"]["reports"]] == [2.0, 2.0]
    assert found.reached_ranks == [0, 1]


def test_a_mutant_the_claim_cannot_see_survives(mutated):
    found = outcome(mutated, "all-reduce-unchanged")
    assert found.status == "survived" and not found.caught("sum_of_ranks")
    assert "still held" in found.reason or "still meets" in found.reason


def test_a_mutant_that_never_runs_is_an_error_naming_what_it_patched(mutated):
    found = outcome(mutated, "broadcast-does-nothing")
    assert found.status == "not_reached"
    assert "the snippet never reaches" in found.reason and "broadcast" in found.reason


def test_a_crash_under_a_mutant_is_not_a_catch(mutated):
    found = outcome(mutated, "all-reduce-raises")
    assert found.status == "crashed" and not found.caught("sum_of_ranks")
    assert "not caught by a value" in found.reason and "all_reduce broken on purpose" in found.reason


def test_an_unknown_mutant_is_named(mutated):
    found = outcome(mutated, "no-such-mutant")
    assert found.status == "not_run" and "no snippets/*/_mutants.py defines" in found.reason


def test_a_mutant_does_not_leak_into_the_next_snippet_of_the_launch(tmp_path):
    path = str(SNIPPETS / "sums" / "sum_of_ranks.py")
    source = str(SNIPPETS / "sums" / "_mutants.py")
    specs = [SnippetSpec("sum_of_ranks@max", path, 60, {"name": "all-reduce-takes-the-max", "source": source}),
             SnippetSpec("sum_of_ranks", path, 60)]  # fmt: skip
    settings = LaunchSettings(num_processes=2)
    runs = run_snippets(specs, settings, tmp_path, "grouped")
    assert len(list(tmp_path.rglob("manifest.json"))) == 1  # both in one launch
    assert runs["sum_of_ranks@max"].ranks[0].mutant_reached
    (after,) = judge(sum_proof(), runs["sum_of_ranks"], settings)
    assert after.passed, after.reason  # the sum is 3 again: the max mutant was undone


def test_a_patch_is_undone_whatever_kind_of_attribute_it_replaced():
    class Owner:
        def method(self):
            return "method"

        @staticmethod
        def static():
            return "static"

        @classmethod
        def klass(cls):
            return cls.__name__

    module = types.ModuleType("m")
    module.constant = 1
    patch = Patch()
    patch.wrap(Owner, "method", lambda original, self: "mutated " + original(self))
    patch.wrap(Owner, "static", lambda original: "mutated " + original())
    patch.wrap(Owner, "klass", lambda original, cls: "mutated " + original(cls))
    patch.replace(module, "constant", 2)
    assert not patch.reached
    assert (Owner().method(), Owner.static(), Owner.klass(), module.constant) == (
        "mutated method", "mutated static", "mutated Owner", 2)  # fmt: skip
    assert patch.reached
    patch.undo()
    assert (Owner().method(), Owner.static(), Owner.klass(), module.constant) == ("method", "static", "Owner", 1)
    assert "method" not in vars(Owner) or vars(Owner)["method"].__name__ == "method"


def test_a_name_defined_twice_is_refused(tmp_path):
    (tmp_path / "_mutants.py").write_text(
        "from verify.mutation import mutant\n"
        "@mutant('same', 'one')\ndef a(patch): pass\n"
        "@mutant('same', 'two')\ndef b(patch): pass\n"
    )
    with pytest.raises(MutantError, match="defined twice"):
        mutants_in(tmp_path / "_mutants.py")


def test_every_claim_names_a_mutant_or_says_why_none_can_break_it():
    from verify.labs import load_labs

    known = catalogue()
    claims = [(proof.page, claim_id, claim) for proof in all_proofs(load_pages()) for claim_id, claim in proof.claims.items()]
    claims += [(lab.page, claim_id, claim) for lab in load_labs()[0] for claim_id, claim in lab.claims.items()]
    problems = []
    for page, claim_id, claim in claims:
        if bool(claim.breaks_when) == bool(claim.no_mutant):
            problems.append(f"{page}::{claim_id}: needs exactly one of breaks_when or no_mutant")
        problems += [f"{page}::{claim_id}: no mutant named {name!r}" for name in claim.breaks_when if name not in known]
    assert not problems, "\n".join(problems)
    with_mutants = sum(bool(claim.breaks_when) for _, _, claim in claims)
    print(f"{with_mutants} of {len(claims)} claims name a mutant; {len(known)} mutants")
    # The floor is for claims that read the library's behaviour here. A modelled claim often checks the
    # snippet's own model (a rounding emulated bit for bit, a cost formula), where no library bug enters, and
    # a GPU-ready claim's mutants cannot run on this machine: each of those still names one or says why not.
    gpu_ready = {(proof.page, claim_id) for proof in all_proofs(load_pages()) if proof.requires == "cuda"
                 for claim_id in proof.claims}  # fmt: skip
    measured = [claim for page, claim_id, claim in claims
                if getattr(claim, "level", None) != "modelled" and (page, claim_id) not in gpu_ready]  # fmt: skip
    measured_with = sum(bool(claim.breaks_when) for claim in measured)
    print(f"measured claims: {measured_with} of {len(measured)} name a mutant")
    assert measured_with >= 0.9 * len(measured)
    assert len(known) >= 60
    assert all(one.describes for one in known.values())


WRONG_ANSWERS = re.compile(r"^## Common wrong answers\n(.*?)(?=^## |\Z)", re.M | re.S)
NO_MUTANT = re.compile(r"^ *<!-- no mutant: (\S.*?) -->[ \t]*$", re.M)


def wrong_answers(text: str) -> list[tuple[str, str]]:
    """(heading, body) of each `### "..."` entry under a page's Common wrong answers."""
    section = WRONG_ANSWERS.search(text)
    entries = re.split(r"(?m)^### ", section.group(1)) if section else []
    return [(entry.splitlines()[0], entry) for entry in entries[1:]]


@pytest.mark.parametrize("page", load_pages(), ids=lambda page: page.path.stem)
def test_every_wrong_answer_shows_its_world_or_says_why_no_library_bug_makes_it(page):
    """A wrong answer about library behaviour carries `<!-- mutant: NAME -->`, NAME a mutant that breaks one
    of the page's claims (the page shows that world's measurement there); any other wrong answer carries
    `<!-- no mutant: reason -->` (a misreading of the user's own code, hardware, or advice)."""
    named = {name for proof in page.proofs for claim in proof.claims.values() for name in claim.breaks_when}
    problems = []
    text = page.path.read_text(encoding="utf-8")
    section = WRONG_ANSWERS.search(text)
    if section:
        # a wrong answer written as a list item, not as its own `###` entry, would escape the check below
        before_first_entry = re.split(r"(?m)^### ", section.group(1))[0]
        if not wrong_answers(text) or re.search(r"(?m)^[*-] ", before_first_entry):
            problems.append("Common wrong answers: each wrong answer must be its own `### \"...\"` entry, not a list item")
    for heading, body in wrong_answers(text):
        markers = [match.group(2) for match in MUTANT_MARKER.finditer(body)]
        problems += [f"{heading}: mutant {name!r} breaks no claim of this page" for name in markers if name not in named]
        if not markers and not NO_MUTANT.search(body):
            problems.append(f"{heading}: neither <!-- mutant: NAME --> nor <!-- no mutant: reason -->")
    assert not problems, f"{page.path}:\n" + "\n".join(problems)


def test_a_lab_runs_in_the_broken_library_its_mutants_make(tmp_path):
    """notebook_launcher forks its workers from the kernel: a mutant applied there reaches them, and the
    lab's claim must fail by its value; a mutant whose code no worker reaches is an error, not a kill."""
    from verify.labs import read_lab, verify_labs

    lab = read_lab(SNIPPETS / "summing_lab.py")  # beside the test snippets: their mutants are its catalogue
    found = verify_labs([lab], tmp_path / "work", evidence_dir=tmp_path / "evidence", executed_dir=tmp_path / "executed",
                        mutants=True)  # fmt: skip
    assert found.verdicts[("summing_lab", "summing_lab.py", "workers_sum_their_ranks")].passed
    killed = found.mutants[("summing_lab", "summing_lab.py", "all-reduce-takes-the-max")]
    assert killed.status == "killed" and killed.reached_ranks == [0], killed.reason
    assert killed.claims["workers_sum_their_ranks"]["reports"][0]["measured"] == 2.0
    unreached = found.mutants[("summing_lab", "summing_lab.py", "broadcast-does-nothing")]
    assert unreached.status == "not_reached" and "never reaches" in unreached.reason, unreached.reason
    recorded = {entry["mutant"] for entry in read(lab, tmp_path / "evidence")["mutants"]}
    assert recorded == {"all-reduce-takes-the-max", "broadcast-does-nothing"}
    assert [path.name for path in (tmp_path / "executed").iterdir()] == ["summing_lab.ipynb"]  # the plain run only
