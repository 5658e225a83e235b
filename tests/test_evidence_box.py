"""The evidence box and the mutant notes, rendered from hand-made evidence in a temp dir (no build);
the reference set's refresh. The browser checks of the same box are in tests/test_browser.py."""

import json
from pathlib import Path

import pytest

from verify import evidence
from verify.website import evidence_box, reference
from verify.pages import Claim, Page, Proof, load_page
from verify.paths import DOCS_DIR

PAGE = DOCS_DIR / "questions" / "data-parallelism" / "data-parallel-accuracy.md"


@pytest.fixture
def evidence_dir(tmp_path, monkeypatch):
    folder = tmp_path / "evidence"
    folder.mkdir()
    monkeypatch.setattr(evidence, "EVIDENCE_DIR", folder)
    monkeypatch.setattr(evidence, "REFERENCE_EVIDENCE_DIR", tmp_path / "reference")
    return folder


def record(proof, claims, **extra) -> dict:
    return {"page": proof.page, "snippet": proof.snippet, "date": "2026-01-02T03:04:05+00:00",
            "versions": {"python": "3.11.7", "torch": "2.13.0", "accelerate": "1.15.0"}, "world_size": 2,
            "backend": "gloo", "distributed_type": "MULTI_CPU", "device_per_rank": {"0": "cpu", "1": "cpu"},
            "platform": "Linux-6.1.0-x86_64-with-glibc2.36", "status": "finished", "snippet_seconds": 1.5,
            "claims": claims, **extra}  # fmt: skip


def claim(claim_id, says, measured=0.0, passed=True, reason="", details=None):
    return {"id": claim_id, "statement": says, "passed": passed, "reason": reason,
            "reports": [{"rank": rank, "measured": measured, "control": 0.5, "op": "<=", "bound": 1e-06,
                         "details": details or {}} for rank in (0, 1)]}  # fmt: skip


def test_everything_from_the_evidence_is_escaped(evidence_dir):
    odd = 'a"quote<b>'
    proof = Proof(page="p", snippet="ddp_gradients_match_full_batch.py",
                  claims={odd: Claim(says="x < y & <i>z</i>", control='removes "all" <hooks>')})  # fmt: skip
    found = record(proof, [claim(odd, "x < y & <i>z</i>", passed=False, reason="<script>alert(1)</script>",
                                 details={"<k>": "<v>"})])  # fmt: skip
    evidence.write(found, evidence_dir)
    html = evidence_box.box(proof, "p")
    assert "<b>" not in html and "<i>" not in html and "<script>" not in html and "<k>" not in html
    assert 'id="claim-a&quot;quote&lt;b&gt;"' in html
    assert "x &lt; y &amp; &lt;i&gt;z&lt;/i&gt;" in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_numbers_are_written_as_a_reader_writes_them():
    assert evidence_box.number(32768.0) == "32768" and evidence_box.number(32768) == "32768"
    assert evidence_box.number(1.25e-08) == "1.25e-08" and evidence_box.number(0.333333) == "0.3333"
    assert evidence_box.with_unit(83460, "bytes") == "83460 bytes" and evidence_box.with_unit(12.5, "%") == "12.5%"
    assert evidence_box.unit_of("allreduce_bytes_equal_gradient_bytes") == "bytes"
    assert evidence_box.unit_of("optimizer_step_repeated_on_every_rank") == ""
    assert evidence_box.expectation("in", [1, 2], "") == "between 1 and 2"


def test_evidence_of_an_earlier_snippet_says_so(evidence_dir):
    proof = load_page(PAGE).proofs[0]
    claims = [claim(c, d.says) for c, d in proof.claims.items()]
    path = evidence.path_of(proof.page, proof.snippet, evidence_dir)
    path.parent.mkdir(exist_ok=True)
    here = evidence.versions()
    path.write_text(json.dumps(record(proof, claims, fingerprint="0" * 64, versions=here)))
    assert "measured on an earlier version of this snippet" in evidence_box.box(proof, "data-parallel-accuracy")
    path.write_text(json.dumps(record(proof, claims, fingerprint="0" * 64, versions={**here, "torch": "9.9.9"})))
    html = evidence_box.box(proof, "data-parallel-accuracy")
    assert f"Measured with torch 9.9.9; this site was built with torch {here['torch']}" in html
    from verify.runner import LaunchSettings

    current = evidence.fingerprint(proof, LaunchSettings(num_processes=2, use_cpu=True))
    path.write_text(json.dumps(record(proof, claims, fingerprint=current, versions=here)))
    html = evidence_box.box(proof, "data-parallel-accuracy")
    assert "earlier version" not in html and "Evidence: every claim held" in html
    assert "Measured on 2 January 2026 on the machine that built this site (Linux x86_64 machine)" in html


def mutant_evidence(proof, status="killed"):
    first = next(iter(proof.claims))
    return {"mutant": "ddp-sums-gradients", "describes": "DDP sums the gradients <instead> of averaging them",
            "status": status, "reached_ranks": [0, 1],
            "claims": [{"id": first, "killed": status == "killed", "how": "measured missed the bound",
                        "reports": [{"rank": 0, "measured": 0.68, "control": 0.41, "op": "<=", "bound": 1e-06}]}]}  # fmt: skip


def test_mutant_rows_and_markers(evidence_dir):
    page = load_page(PAGE)
    proof = page.proofs[0]
    claims = [claim(c, d.says) for c, d in proof.claims.items()]
    marker = "Intro\n\n<!-- mutant: ddp-sums-gradients -->\n\n* a list\n\n    <!-- mutant: ddp-sums-gradients -->\n"
    # no mutant evidence yet: a neutral line naming the mutant and the command
    without = evidence_box.place_mutants(marker, page)
    assert '!!! note "Broken on purpose: ddp-sums-gradients"' in without
    assert "python -m pytest verify -k data-parallel-accuracy --mutants" in without
    assert "\n    !!! note" in without  # an indented marker keeps its indentation (inside a list item)

    path = evidence.path_of(proof.page, proof.snippet, evidence_dir)
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(record(proof, claims, mutants=[mutant_evidence(proof)])))
    html = evidence_box.box(proof, page.slug)
    assert "Broken on purpose: DDP sums the gradients &lt;instead&gt; of averaging them." in html
    assert "0.68" in html and "the claim failed" in html and "this proof would catch that bug" in html
    note = evidence_box.place_mutants(marker, page)
    assert '!!! bug "In a world where DDP sums the gradients &#60;instead&#62; of averaging them"' in note
    assert "measured **0.68**, needs at most 1e-06: the claim fails" in note

    path.write_text(json.dumps(record(proof, claims, mutants=[mutant_evidence(proof, "survived")])))
    assert "would NOT catch that bug" in evidence_box.box(proof, page.slug)
    assert "!!! failure" in evidence_box.place_mutants(marker, page)


def test_reference_evidence_is_labelled_and_local_evidence_wins(evidence_dir, tmp_path):
    page = load_page(PAGE)
    proof = page.proofs[0]
    claims = [claim(c, d.says) for c, d in proof.claims.items()]
    (tmp_path / "reference").mkdir()
    reference_record = record(proof, claims, machine="a Linux x86_64 machine with 2 CPU cores (Test CPU), no GPU")
    evidence.write(reference_record, tmp_path / "reference")
    html = evidence_box.box(proof, page.slug)
    assert "Reference evidence, measured on 2 January 2026 on a Linux x86_64 machine with 2 CPU cores (Test CPU), no GPU (not" in html
    assert "(reference run)" in html and "python -m pytest verify -k data-parallel-accuracy" in html
    evidence.write(record(proof, claims), evidence_dir)
    assert "Reference evidence" not in evidence_box.box(proof, page.slug)


def test_the_reference_set_is_refreshed_from_this_machines_evidence(tmp_path, monkeypatch):
    source, labs_source, target = tmp_path / "evidence", tmp_path / "labs", tmp_path / "reference"
    source.mkdir()
    labs_source.mkdir()
    proof = load_page(PAGE).proofs[0]
    evidence.write(record(proof, []), source)
    (source / "gone").mkdir()
    (source / "gone" / "no_longer_declared.json").write_text("{}")
    noisy = {"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "stream", "name": "stderr", "text": ["/home/me/tqdm/auto.py:21: TqdmWarning: IProgress not found."]},
        {"output_type": "stream", "name": "stdout", "text": ["kept"]}]}]}  # fmt: skip
    (labs_source / "lab1_first_distributed_run.ipynb").write_text(json.dumps(noisy))
    target.mkdir()
    (target / "old-page").mkdir()
    (target / "old-page" / "old.json").write_text("{}")
    copied, missing = reference.refresh(source, labs_source, target, machine="a test machine")
    assert copied == 1 and not (target / "old-page").exists() and not (target / "gone").exists()
    copied_record = target / "data-parallel-accuracy" / "ddp_gradients_match_full_batch.json"
    assert json.loads(copied_record.read_text())["machine"] == "a test machine"
    copied_lab = (target / "labs" / "lab1_first_distributed_run.ipynb").read_text()
    assert "kept" in copied_lab and "TqdmWarning" not in copied_lab and "/home/me" not in copied_lab
    assert "data-parallel-accuracy/ddp_gradients_match_full_batch.json" not in missing and len(missing) > 10
    assert "CPU cores" in reference.describe_machine()


def test_markdown_text_escapes_in_one_pass():
    """'_' became '&#95;' and then its '#' became '&#35;': a mutant's split_batches showed as split&amp;#95;batches."""
    assert evidence_box.md_text("split_batches #1 <b> 'x' &") == "split&#95;batches &#35;1 &#60;b&#62; &#39;x&#39; &#38;"


def test_a_mutant_caught_through_its_control_says_so():
    """Under no-sync-still-allreduces the claim's value still meets its bound; the control meeting it too is
    what fails the claim, and a reader must see that rather than 'measured 3e-08, needs at most 1e-06: failed'."""
    claim = {"killed": True, "how": "the control met the bound"}
    said = evidence_box.mutant_outcome(claim, {"measured": 2.98e-08, "control": 2.98e-08}, "", "the claim failed", "held")
    assert said == "the control measured 2.98e-08 and met it too, so the claim failed"
    missed = {"killed": True, "how": "measured missed the bound"}
    assert evidence_box.mutant_outcome(missed, {"measured": 0.31}, "", "the claim failed", "held") == "the claim failed"
