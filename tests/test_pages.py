"""Integrity: every snippet belongs to a page, every page's proofs and errata resolve."""

import re

import pytest

from verify.pages import DOCS_DIR, ROOT, SNIPPETS_DIR, all_proofs, load_pages
from verify.site_hooks import SOURCES

PAGES = load_pages()
SEEDS = ROOT.parent / "shared" / "seeds"  # the handouts; beside a checkout in this workplace, absent elsewhere


def snippet_files():
    return sorted(p.name for p in SNIPPETS_DIR.glob("*.py") if not p.name.startswith("_"))


def test_every_snippet_belongs_to_a_page():
    used = {proof.snippet for proof in all_proofs(PAGES)}
    assert [name for name in snippet_files() if name not in used] == []


@pytest.mark.parametrize("proof", all_proofs(PAGES), ids=lambda p: f"{p.page}::{p.snippet}")
def test_each_proof_resolves(proof):
    assert proof.path.exists(), f"page {proof.page} names a missing snippet {proof.snippet}"
    source = proof.path.read_text()
    for claim, statement in proof.claims.items():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", claim), f"claim id {claim!r} is not snake_case"
        assert statement.strip(), f"claim {claim} has no statement"
        assert f'"{claim}"' in source, f"{proof.snippet} never mentions the claim id {claim!r}"
    page_text = (DOCS_DIR / "questions" / f"{proof.page}.md").read_text()
    assert f"<!-- proof: {proof.snippet} -->" in page_text


def test_question_pages_follow_the_answer_layout():
    for page in PAGES:
        if page.path.parent.name != "questions":
            continue
        text = page.path.read_text()
        assert page.proofs, f"{page.slug} proves nothing"
        for section in ('??? success "30-second answer"', "## Mechanism", "## Common wrong answers", "## Proof",
                        "## Sources", "## Follow-up questions"):  # fmt: skip
            assert section in text, f"{page.slug} lacks {section}"


def test_each_handout_error_is_anchored_on_its_page_and_sourced():
    ids = [error["id"] for page in PAGES for error in page.handout_errors]
    assert len(ids) == len(set(ids)), "two handout errors share an id"
    for page in PAGES:
        text = page.path.read_text()
        for error in page.handout_errors:
            assert error["source"] in SOURCES, error
            assert "{#" + error["id"] + "}" in text, f"{page.slug} has no heading anchored {error['id']}"
            assert error["quote"].strip() and error["correction"].strip()


@pytest.mark.skipif(not SEEDS.exists(), reason=f"the handouts are not beside this checkout ({SEEDS})")
def test_each_quoted_handout_error_is_in_the_handouts():
    squeeze = lambda text: re.sub(r"\s+", "", text)  # noqa: E731  OCR line breaks and spacing vary
    seeds = squeeze("".join(path.read_text() for path in SEEDS.glob("*.txt")))
    for page in PAGES:
        for error in page.handout_errors:
            assert squeeze(error["quote"]) in seeds, f"{page.slug}: {error['quote']!r} is not in the handouts"


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    commands = re.findall(r"```bash\n(.*?)\n```", readme, re.S)
    serve, test = commands[0].strip(), commands[1].strip()
    assert "mkdocs serve" in serve and "127.0.0.1:8000" in serve
    assert test in ci
