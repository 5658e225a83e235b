"""A page's front matter: errors name the file and line, fail that page alone, and ids are unique."""

from pathlib import Path

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
