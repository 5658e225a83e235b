"""Evidence values reach the site as text, never as markup: a measured string, a mutant's `how`, a matrix
row, each poisoned with HTML, renders inert (the evidence box already did; these three places did not)."""

import types

import markdown

from verify.pages import Claim
from verify.website import evidence_box, hooks, study

POISON = "<script>alert('x')</script>"
EXTENSIONS = ["admonition", "attr_list", "md_in_html", "tables", "pymdownx.details", "pymdownx.superfences"]


def rendered(text: str) -> str:
    return markdown.markdown(text, extensions=EXTENSIONS)


def assert_inert(html: str):
    assert "<script" not in html and "<img" not in html, html


def test_a_mutants_how_is_text_in_its_admonition(monkeypatch):
    entry = {"mutant": "m", "describes": "a broken world", "status": "survived",
             "claims": [{"id": "c", "killed": False, "how": POISON, "reports": [{"measured": 1.0, "op": "==", "bound": 1.0}]}]}  # fmt: skip
    monkeypatch.setattr(evidence_box.evidence, "shown", lambda *args, **kwargs: {"mutants": [entry]})
    page = types.SimpleNamespace(proofs=[types.SimpleNamespace(snippet="s.py")], slug="p")
    html = rendered(evidence_box.mutant_note("m", page))
    assert_inert(html)
    assert "alert" in html  # still shown, as text


def test_a_matrix_row_is_text_in_the_releases_table(monkeypatch):
    rows = {"9.9.9": [{"claim": "c", "outcome": POISON, "verdict": "<img src=x onerror=alert(1)>"}]}
    monkeypatch.setattr(hooks.evidence, "across_releases", lambda *args, **kwargs: rows)
    proof = types.SimpleNamespace(snippet="s.py", page="p", claims={"c": Claim(says="x", control="c")})
    html = rendered(hooks.releases_block(proof))
    assert_inert(html)
    assert "MISMATCH" in html


def test_a_backtick_in_a_measured_string_cannot_open_the_cheat_sheets_markup(monkeypatch):
    claim = {"id": "c", "passed": True, "reports": [{"measured": "x`<img src=x onerror=alert(1)>`", "control": POISON}]}
    monkeypatch.setattr(study.evidence, "current", lambda *args, **kwargs: {"claims": [claim], "date": "2026-12-01T00"})
    page = types.SimpleNamespace(proofs=[types.SimpleNamespace(snippet="s.py", claims={"c": None})])
    html = rendered("- fact" + study.measured_note(page, "c"))
    assert_inert(html)
    assert "<code>" in html
