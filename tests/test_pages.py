"""Integrity: every snippet belongs to a page, every page's proofs and errata resolve."""

import re

import pytest

from verify.pages import DIFFICULTIES, all_proofs, load_pages, question_pages
from verify.paths import ROOT, SNIPPETS_DIR
from verify.website.hooks import SOURCES

PAGES = load_pages()
SEEDS = ROOT.parent / "shared" / "seeds"  # the handouts; beside a checkout in this workplace, absent elsewhere


def snippet_files():
    return sorted(p.name for p in SNIPPETS_DIR.rglob("*.py") if not p.name.startswith("_"))


def test_every_page_front_matter_reads():
    assert [page.error for page in PAGES if page.error] == []


def test_snippet_names_are_unique_and_sit_in_their_pages_topic():
    names = snippet_files()
    assert len(names) == len(set(names)), "two snippets share a file name"
    for page in question_pages(PAGES):
        for proof in page.proofs:
            assert proof.path.parent.name == page.topic, f"{proof.snippet} belongs in snippets/{page.topic}/"


def test_every_snippet_belongs_to_a_page():
    used = {proof.snippet for proof in all_proofs(PAGES)}
    assert [name for name in snippet_files() if name not in used] == []


@pytest.mark.parametrize("proof", all_proofs(PAGES), ids=lambda p: f"{p.page}::{p.snippet}")
def test_each_proof_resolves(proof):
    assert proof.path.exists(), f"page {proof.page} names a missing snippet {proof.snippet}"
    source = proof.path.read_text()
    for claim_id, claim in proof.claims.items():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", claim_id), f"claim id {claim_id!r} is not snake_case"
        assert claim.says.strip(), f"claim {claim_id} has no statement"
        assert f'"{claim_id}"' in source, f"{proof.snippet} never mentions the claim id {claim_id!r}"
    page = next(page for page in PAGES if page.slug == proof.page)
    assert f"<!-- proof: {proof.snippet} -->" in page.path.read_text()


@pytest.mark.parametrize("proof", all_proofs(PAGES), ids=lambda p: f"{p.page}::{p.snippet}")
def test_each_claim_says_what_its_control_removes(proof):
    missing = [claim_id for claim_id, claim in proof.claims.items() if not (claim.control or "").strip()]
    assert missing == [], f"{proof.page}: claims without `control:` (what the negative control removes): {missing}"


def test_question_pages_follow_the_answer_layout():
    for page in question_pages(PAGES):
        text = page.path.read_text()
        # A page no run can prove here (a library that is not installed) rests on checked quotes alone,
        # and its Proof section says so
        assert page.proofs or (len(page.sources) >= 3 and "No run on this page" in text), f"{page.slug} proves nothing"
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


@pytest.mark.parametrize("page", question_pages(PAGES), ids=lambda page: page.slug)
def test_each_question_has_a_difficulty_and_key_facts_that_name_its_claims(page):
    assert page.difficulty in DIFFICULTIES, f"{page.slug}: difficulty must be one of {DIFFICULTIES}"
    assert page.key_facts, f"{page.slug}: no key_facts (a fact and the claim that proves it)"
    for fact in page.key_facts:
        assert fact.get("fact", "").strip(), f"{page.slug}: a key fact without text"
        assert fact.get("claim") in page.claim_ids or fact.get("source"), (
            f"{page.slug}: key fact {fact.get('fact')!r} names neither a claim of this page nor a source"
        )


@pytest.mark.parametrize("page", question_pages(PAGES), ids=lambda page: page.slug)
def test_thirty_second_answer_fits_in_thirty_seconds(page):
    text = page.path.read_text()
    block = re.search(r'\?\?\? success "30-second answer"\n((?:    .*\n|\n)+)', text)
    assert block, f"{page.slug}: no 30-second answer"
    spoken = re.sub(r"<!--.*?-->", " ", block.group(1), flags=re.S)  # markers for the checks are not read aloud
    words = len(re.findall(r"[A-Za-z0-9][\w.'+/-]*|[\u4e00-\u9fff]", spoken))
    assert words <= 90, f"{page.slug}: the 30-second answer has {words} words (at most 90)"
