"""Only true pictures: every figure drawn from the reference evidence, and again from the evidence of a run
with each mutant that broke a claim it draws, must differ from it; a figure whose claim failed shows that
failure in its place, not a picture.

The mutant evidence is the reference record with the claim's reports replaced by those the `--mutants`
run recorded under that mutant (`mutants[].claims[].reports`: measured and control per rank, and the
details where the run kept them); the other claims keep their reference reports."""

import copy
import json

import pytest

from verify import evidence
from verify.pages import load_pages
from verify.paths import REFERENCE_EVIDENCE_DIR
from verify.website import figures

PAGES = load_pages()
FIGURES = [(spec, page) for page in PAGES for spec in figures.declared(page)]


def drawn_claims(spec: dict) -> set:
    return {item.get("claim") or spec.get("claim") for item in spec["data"]} | ({spec["bound"]} if spec.get("bound") else set())


def reference(proof) -> dict | None:
    return evidence.read(proof, REFERENCE_EVIDENCE_DIR)


def under_mutant(record: dict, mutant: dict) -> dict:
    """The reference record as the mutant's run measured it: its claims' reports replaced, drawn as if held."""
    found = copy.deepcopy(record)
    runs = {claim["id"]: claim["reports"] for claim in mutant.get("claims", [])}
    for claim in found["claims"]:
        if claim["id"] in runs and runs[claim["id"]]:
            before = {report.get("rank"): report for report in claim["reports"]}
            claim["reports"] = [{**before.get(report.get("rank"), {}), **{k: v for k, v in report.items() if v is not None}}
                                for report in runs[claim["id"]]]  # fmt: skip
            claim["passed"] = True  # drawn as if it held: the picture itself must show the bug
    return found


def reads_details(spec: dict) -> set:
    """The claims whose details this figure draws."""
    keys = lambda item: [k for field in ("value", "x", "y", "events") for k in (item.get(field) if isinstance(item.get(field), list) else [item.get(field)])]
    return {item.get("claim") or spec.get("claim") for item in spec["data"] if any(str(k).startswith("details.") for k in keys(item))}


def unrecorded(spec: dict, mutant: dict) -> bool:
    """The run under this mutant kept no details of a claim whose details the figure draws (a run judged
    before verify/judge.py kept the details in mutant reports)."""
    wanted = reads_details(spec)
    return any(claim["id"] in wanted and any(report.get("details") is None for report in claim.get("reports", []))
               for claim in mutant.get("claims", []))  # fmt: skip


def mutant_worlds(spec: dict, page, recorded_only: bool = True) -> list[tuple[str, dict]]:
    """(mutant, {snippet: record}) for each mutant that killed a claim this figure draws by its value
    (and, with `recorded_only`, kept the details the figure draws)."""
    claims = drawn_claims(spec)
    records = {proof.snippet: reference(proof) for proof in page.proofs if set(proof.claims) & claims}
    worlds = []
    for snippet, record in records.items():
        for mutant in (record or {}).get("mutants") or []:
            if any(claim["id"] in claims and claim.get("killed") and claim.get("how") == "measured missed the bound"
                   for claim in mutant.get("claims", [])) and not (recorded_only and unrecorded(spec, mutant)):  # fmt: skip
                worlds.append((mutant["mutant"], {**records, snippet: under_mutant(record, mutant)}))
    return worlds


@pytest.fixture
def reference_only(tmp_path, monkeypatch):
    """The site's view with no evidence of this machine: the committed reference set."""
    monkeypatch.setattr(evidence, "EVIDENCE_DIR", tmp_path)


def drawing(spec, page):
    resolved = figures.resolve(spec, page)
    return resolved, figures.draw(spec, resolved, figures.bound_of(spec, page))


@pytest.mark.parametrize("spec, page", FIGURES, ids=[spec["id"] for spec, _ in FIGURES])
def test_a_mutant_draws_another_figure(spec, page, reference_only, monkeypatch):
    """Under every mutant that broke a claim this figure draws, the picture changes. A mutant whose
    reference run kept no details (runs judged before mutant reports kept them) and whose figure reads
    details is unchecked, not passed: the next full --mutants run and reference refresh check it."""
    try:
        resolved, svg = drawing(spec, page)
    except figures.MissingData as missing:
        pytest.fail(f"{page.slug}: figure {spec['id']} cannot be drawn from the reference evidence: {missing}")
    worlds = mutant_worlds(spec, page, recorded_only=False)
    if not worlds:
        pytest.skip(f"no mutant run in the reference evidence broke a claim of {spec['id']} by its value (no_mutant claims)")
    same, unchecked, differ = [], [], []
    mutants = {m["mutant"]: m for proof in page.proofs for m in (reference(proof) or {}).get("mutants") or []}
    unpictured = spec.get("not_pictured") or {}  # mutant -> why this figure cannot show what it breaks
    for name, records in [(name, records) for name, records in worlds if name not in unpictured]:
        monkeypatch.setattr(evidence, "current", lambda proof, records=records: records.get(proof.snippet) or reference(proof))
        mutant_resolved, mutant_svg = drawing(spec, page)
        if mutant_resolved != resolved and mutant_svg != svg:
            differ.append(name)
        elif unrecorded(spec, mutants[name]):
            unchecked.append(name)
        else:
            same.append(name)
    assert not same, f"{page.slug}: figure {spec['id']} is drawn the same under {same}: it does not picture what they break"
    if not differ:
        pytest.skip(f"{spec['id']} draws details its mutants' reference runs did not keep ({unchecked}): checked after "
                    "the next full --mutants run refreshes the reference evidence")


def test_a_figure_whose_claim_failed_under_a_mutant_shows_the_failure_in_its_place(reference_only, monkeypatch):
    spec, page = next((spec, page) for spec, page in FIGURES if mutant_worlds(spec, page))
    name, records = mutant_worlds(spec, page)[0]
    failed = {snippet: json.loads(json.dumps(record)) for snippet, record in records.items()}
    for record in failed.values():
        for claim in record["claims"]:
            claim["passed"] = claim["id"] not in drawn_claims(spec)
    monkeypatch.setattr(evidence, "current", lambda proof: failed.get(proof.snippet))
    shown = figures.place(page.path.read_text(encoding="utf-8"), page, lambda path: True)
    assert "failed in the latest run, so it draws no figure" in shown
    assert figures.path_of(spec["id"]) not in shown, "a failed claim's figure is no picture of the mechanism"


def test_a_figure_without_evidence_says_what_is_missing(tmp_path, reference_only, monkeypatch):
    spec, page = FIGURES[0]
    monkeypatch.setattr(evidence, "REFERENCE_EVIDENCE_DIR", tmp_path)
    shown = figures.place(page.path.read_text(encoding="utf-8"), page, lambda path: True)
    assert "no current evidence for" in shown and f"python -m pytest verify -k {page.slug}" in shown
    assert figures.path_of(spec["id"]) not in shown
