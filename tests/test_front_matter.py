"""A page's front matter: errors name the file and line, fail that page alone, and ids are unique."""

from pathlib import Path

import pytest

from tests.conftest import BROKEN
from verify.pages import load_page, load_pages


def test_a_page_declaring_one_claim_id_in_two_proofs_is_refused():
    page = load_page(BROKEN / "duplicate-ids.md", BROKEN / "snippets")
    assert page.proofs == ()
    assert "duplicate-ids.md: claim id 'same' is declared by both zz_false.py and zz_true.py" in page.error


def test_malformed_front_matter_fails_that_page_alone_naming_its_file_and_line(tmp_path: Path):
    (tmp_path / "good.md").write_text("---\ntitle: fine\nproofs:\n  - snippet: a.py\n    claims: {c: says}\n---\n")
    (tmp_path / "bad.md").write_text("---\ntitle: fine\nproofs:\n  - snippet: a.py\n   claims: [unclosed\n---\n")
    good, bad = sorted(load_pages(tmp_path, tmp_path), key=lambda page: page.slug != "good")
    assert good.error is None and [p.snippet for p in good.proofs] == ["a.py"]
    assert bad.error.startswith(f"{tmp_path / 'bad.md'}:5: malformed front matter")


def test_verify_collects_a_failing_test_for_a_malformed_page_and_still_runs_the_others(pytester_like=None):
    # The collection hook turns a page's error into a test of its own (verify/conftest.py).
    import verify.conftest as hooks

    class Metafunc:
        fixturenames = ["claim"]

        def parametrize(self, name, cases, ids):
            self.cases, self.ids = cases, ids

    broken = load_page(BROKEN / "duplicate-ids.md", BROKEN / "snippets")
    original = hooks.load_pages
    hooks.load_pages = lambda: [broken, *original()]
    try:
        metafunc = Metafunc()
        hooks.pytest_generate_tests(metafunc)
    finally:
        hooks.load_pages = original
    assert "duplicate-ids::front-matter" in metafunc.ids
    assert len(metafunc.ids) > 1  # the healthy pages' claims are collected too


GOOD_PROOF = "  - snippet: a.py\n    claims:\n      fine_claim: {says: s, control: c}\n"
# (what replaces the good page's lines, the line the error must name, words it must say)
BAD_FRONT_MATTER = {
    "processes-word": (GOOD_PROOF + '    processes: "two"\n', 7, "proofs.0.processes"),
    "processes-zero": (GOOD_PROOF + "    processes: 0\n", 7, "greater than or equal to 1"),
    "processes-fraction": (GOOD_PROOF + "    processes: 1.5\n", 7, "proofs.0.processes"),
    "processes-negative": (GOOD_PROOF + "    processes: -1\n", 7, "proofs.0.processes"),
    "nodes-zero": (GOOD_PROOF + "    nodes: 0\n", 7, "proofs.0.nodes"),
    "timeout-word": (GOOD_PROOF + "    timeout: abc\n", 7, "proofs.0.timeout"),
    "timeout-typo": (GOOD_PROOF + "    timout: 30\n", 7, "proofs.0.timout: unknown key"),
    "require-typo": (GOOD_PROOF + "    require: cuda\n", 7, "proofs.0.require: unknown key"),
    "requires-gpu": (GOOD_PROOF + "    requires: gpu\n", 7, "proofs.0.requires"),
    "since-not-a-release": ("  - snippet: a.py\n    claims:\n      fine_claim: {says: s, since: 1.x}\n", 6,
                            "not a release number"),
    "snippet-outside": ("  - snippet: /etc/hostname\n    claims: {fine_claim: s}\n", 4, "proofs.0.snippet"),
    "snippet-up": ("  - snippet: ../tests/x.py\n    claims: {fine_claim: s}\n", 4, "proofs.0.snippet"),
    "snippet-glob": ("  - snippet: '*.py'\n    claims: {fine_claim: s}\n", 4, "proofs.0.snippet"),
    "claim-id-markup": ('  - snippet: a.py\n    claims: {"a\\"quote<b>": s}\n', 5, "must be lower-case"),
    "claim-unknown-field": ("  - snippet: a.py\n    claims:\n      fine_claim: {says: s, contrl: c}\n", 6,
                            "contrl: unknown key"),
    "both-mutant-fields": ("  - snippet: a.py\n    claims:\n      fine_claim: {says: s, breaks_when: [x-y], "
                           "no_mutant: why}\n", 6, "not both"),
    "empty-breaks-when": ("  - snippet: a.py\n    claims:\n      fine_claim: {says: s, breaks_when: []}\n", 6,
                          "breaks_when"),
}


@pytest.mark.parametrize("name", BAD_FRONT_MATTER)
def test_a_bad_value_fails_that_page_alone_naming_file_line_and_key(tmp_path: Path, name):
    proof_lines, line, words = BAD_FRONT_MATTER[name]
    (tmp_path / "good.md").write_text("---\ntitle: fine\nproofs:\n" + GOOD_PROOF + "---\n")
    (tmp_path / "bad.md").write_text("---\ntitle: bad\nproofs:\n" + proof_lines + "---\n")
    good, bad = sorted(load_pages(tmp_path, tmp_path), key=lambda page: page.slug != "good")
    assert good.error is None and [p.snippet for p in good.proofs] == ["a.py"]
    assert bad.error is not None and bad.proofs == (), name
    assert bad.error.startswith(f"{tmp_path / 'bad.md'}:{line}: "), bad.error
    assert words in bad.error, bad.error


@pytest.mark.parametrize("top", ["proof: []", "proofs: 5", "difficulty: expert", "timout: 3"])
def test_an_unknown_or_malformed_top_level_key_fails_the_page(tmp_path: Path, top):
    (tmp_path / "bad.md").write_text("---\ntitle: bad\n" + top + "\n---\n")
    (bad,) = load_pages(tmp_path, tmp_path)
    assert bad.error and bad.error.startswith(f"{tmp_path / 'bad.md'}:3: " + top.split(":")[0]), bad.error


def test_every_page_and_lab_of_the_site_fits_the_schema():
    from verify.labs import load_labs

    assert [page.error for page in load_pages() if page.error] == []
    assert load_labs()[1] == []


def test_a_bad_lab_header_fails_that_lab_naming_its_line(tmp_path: Path):
    from verify.labs import load_labs

    header = ("# ---\n# jupyter:\n#   proof:\n#     processes: two\n#     claims:\n#       c: {says: s}\n# ---\n\n"
              "# %%\nprint(1)\n")  # fmt: skip
    (tmp_path / "lab_bad.py").write_text(header)
    proofs, broken = load_labs(tmp_path)
    assert proofs == [] and broken[0].error.startswith(f"{tmp_path / 'lab_bad.py'}:4: processes"), broken[0].error


def test_snippet_names_are_names_not_patterns(tmp_path: Path):
    from verify.pages import find_snippet

    (tmp_path / "topic").mkdir()
    (tmp_path / "_claims.py").write_text("")
    (tmp_path / "topic" / "real.py").write_text("")
    assert find_snippet("real.py", tmp_path) == tmp_path / "topic" / "real.py"
    assert not find_snippet("*.py", tmp_path).exists()


def test_a_mutant_named_as_both_kinds_of_catch_is_refused():
    import pydantic
    import pytest

    from verify.schema import ClaimEntry

    with pytest.raises(pydantic.ValidationError, match="both breaks_when and breaks_control_when"):
        ClaimEntry.model_validate({"says": "s", "breaks_when": ["m"], "breaks_control_when": ["m"]})
    with pytest.raises(pydantic.ValidationError, match="or no_mutant, not both"):
        ClaimEntry.model_validate({"says": "s", "breaks_control_when": ["m"], "no_mutant": "why"})
