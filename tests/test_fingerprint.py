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
