"""Defect 5: whatever can change a verdict is in the fingerprint, so --reuse-evidence never keeps a
stale pass. One test per input that was missing: the time limit, the accelerate config's contents,
and (for labs, whose snippets folder is docs/labs) the judge's snippets/_claims.py."""

import dataclasses
import shutil

from tests.conftest import BROKEN
from verify import evidence, fingerprint
from verify.labs import LabProof
from verify.pages import Claim, Proof
from verify.runner import LaunchSettings

CLAIMS = {"sum_of_ranks": Claim(says="1 + 2 = 3", control="no all-reduce")}
PROOF = Proof(page="p", snippet="passing_claim.py", snippets_dir=BROKEN / "snippets", claims=CLAIMS)
SETTINGS = LaunchSettings(num_processes=2, use_cpu=True)


def test_the_time_limit_is_in_the_fingerprint():
    # a proof that passed within 120 s may hang past 5 s: it must run again under the new limit
    assert evidence.fingerprint(PROOF, SETTINGS) != evidence.fingerprint(dataclasses.replace(PROOF, timeout=5), SETTINGS)


def test_the_accelerate_config_contents_are_in_the_fingerprint(tmp_path):
    config = tmp_path / "cfg.yaml"
    config.write_text("num_processes: 2\nmixed_precision: 'no'\n")
    settings = dataclasses.replace(SETTINGS, config_file=str(config))
    before = evidence.fingerprint(PROOF, settings)
    config.write_text("num_processes: 2\nmixed_precision: bf16\n")  # same path, another launch
    assert evidence.fingerprint(PROOF, settings) != before


def test_a_labs_fingerprint_covers_the_judges_claims_module(tmp_path, monkeypatch):
    snippets, labs = tmp_path / "snippets", tmp_path / "labs"
    snippets.mkdir(), labs.mkdir()
    shutil.copy(BROKEN / "snippets" / "_claims.py", snippets / "_claims.py")
    (labs / "lab_x.py").write_text("# %%\nprint(1)\n")
    monkeypatch.setattr(fingerprint, "SNIPPETS_DIR", snippets)
    lab = LabProof(page="lab_x", snippet="lab_x.py", snippets_dir=labs, claims=CLAIMS)
    before = evidence.fingerprint(lab, SETTINGS)
    (snippets / "_claims.py").write_text((snippets / "_claims.py").read_text() + "\nTOLERANCE_CHANGED = True\n")
    assert evidence.fingerprint(lab, SETTINGS) != before


def test_the_site_can_tell_evidence_made_by_other_code(tmp_path):
    # For the evidence box (the site helper's part): evidence.matches_code(found, proof) needs no settings.
    from verify.judge import judge

    snippets = tmp_path / "snippets"
    snippets.mkdir()
    for name in ("passing_claim.py", "_claims.py"):
        shutil.copy(BROKEN / "snippets" / name, snippets / name)
    proof = dataclasses.replace(PROOF, snippets_dir=snippets)
    found = evidence.record(proof, None, judge(proof, None, SETTINGS), SETTINGS)
    assert evidence.matches_code(found, proof)
    (snippets / "passing_claim.py").write_text((snippets / "passing_claim.py").read_text() + "\n# edited\n")
    assert not evidence.matches_code(found, proof)
    assert not evidence.matches_code({**found, "asked": {}}, proof)  # evidence from before it was recorded


# --- what a fresh clone shows -------------------------------------------------------------------


def reference_proofs():
    from verify import labs
    from verify.pages import all_proofs, load_pages
    from verify.paths import REFERENCE_DIR

    proofs = all_proofs(load_pages()) + labs.load_labs()[0]
    return [(proof, evidence.read(proof, REFERENCE_DIR)) for proof in proofs]


def test_the_committed_reference_evidence_was_made_by_the_committed_code():
    """A change to a proof's snippet, helpers, mutants, the judge's rules or the code that runs it comes with
    fresh reference evidence (`python -m pytest verify -k PAGE --mutants && python -m verify.website.reference`):
    else every fresh clone would tell its reader the evidence is out of date."""
    from verify.website import reference

    stale = {proof.snippet: reference.made_by_other_code(found, proof) for proof, found in reference_proofs() if found}
    assert not {name: changed for name, changed in stale.items() if changed}


def test_a_fresh_clone_shows_no_out_of_date_note(monkeypatch):
    """The first README command on a fresh clone: every page shows the reference evidence, none says it is
    out of date (on the reference machine's versions; other versions are named, as they must be)."""
    from verify.paths import REFERENCE_DIR
    from verify.website import evidence_box

    found = [(proof, found) for proof, found in reference_proofs() if found]
    recorded = found[0][1]["versions"]
    monkeypatch.setattr(fingerprint, "versions", lambda: dict(recorded))
    monkeypatch.setattr(evidence, "versions", lambda: dict(recorded))
    monkeypatch.setattr(evidence, "EVIDENCE_DIR", REFERENCE_DIR / "no-local-evidence")
    monkeypatch.setattr(evidence, "REFERENCE_EVIDENCE_DIR", REFERENCE_DIR)
    out_of_date = [proof.snippet for proof, _ in found if "ev-stale" in evidence_box.box(proof, proof.page)]
    assert out_of_date == [] and len(found) > 100


def test_a_change_outside_what_runs_a_proof_leaves_its_fingerprint(tmp_path, monkeypatch):
    """The site, schema, tests and docs are not in it; the snippet, an imported helper and the running code are."""
    snippets = tmp_path / "snippets"
    snippets.mkdir()
    for name in ("passing_claim.py", "_claims.py"):
        shutil.copy(BROKEN / "snippets" / name, snippets / name)
    (snippets / "_unused_helper.py").write_text("X = 1\n")
    (snippets / "_used_helper.py").write_text("Y = 1\n")
    monkeypatch.setattr(fingerprint, "SNIPPETS_DIR", snippets)
    proof = dataclasses.replace(PROOF, snippets_dir=snippets)
    before = fingerprint.inputs(proof, SETTINGS)
    assert "_claims.py" in " ".join(before["helpers"]) and "_unused_helper" not in " ".join(before["helpers"])
    (snippets / "_unused_helper.py").write_text("X = 2\n")  # not imported by the snippet
    assert fingerprint.inputs(proof, SETTINGS) == before
    reworded = dataclasses.replace(proof, claims={"sum_of_ranks": Claim(says="reworded", control="other words")})
    assert fingerprint.inputs(reworded, SETTINGS) == before  # the sentences are the reader's, not the judge's
    snippet = snippets / "passing_claim.py"
    snippet.write_text("import _used_helper\n" + snippet.read_text())
    after = fingerprint.inputs(proof, SETTINGS)
    assert fingerprint.changes(before, after) == ["the snippet", "its helper modules (_used_helper.py)"]
    assert set(after["running_code"]) == {"verify/runner.py", "verify/worker.py", "verify/mutation.py"}
    assert fingerprint.changes({**after, "other": {"X": "1"}}, after) == ["other"]  # an input added later
