"""--reuse-evidence: a proof runs again exactly when something its verdict depends on changed."""

import dataclasses
import shutil

from tests.conftest import BROKEN
from verify.pages import Claim, Proof
from verify.runner import LaunchSettings
from verify.session import verify_proofs


def launches(work_dir):
    return sorted(work_dir.rglob("manifest.json"))


def test_unchanged_proofs_are_reused_and_any_edit_runs_them_again(tmp_path):
    snippets = tmp_path / "snippets"
    snippets.mkdir()
    for name in ("passing_claim.py", "_claims.py"):
        shutil.copy(BROKEN / "snippets" / name, snippets / name)
    proof = Proof(page="p", snippet="passing_claim.py", snippets_dir=snippets,
                  claims={"sum_of_ranks": Claim(says="1 + 2 = 3", control="no all-reduce")})  # fmt: skip
    settings, evidence = LaunchSettings(num_processes=2), tmp_path / "evidence"

    def run(proof, name):
        work = tmp_path / name
        verdict = verify_proofs([proof], settings, work, "grouped", evidence, reuse_evidence=True)
        return verdict[("p", "passing_claim.py", "sum_of_ranks")], launches(work)

    first, ran = run(proof, "first")
    assert first.passed and ran  # no evidence yet: it runs
    again, ran = run(proof, "again")
    assert again.passed and again.reason.startswith("reused") and not ran  # nothing changed: no launch

    (snippets / "passing_claim.py").write_text((snippets / "passing_claim.py").read_text() + "\n# edited\n")
    edited, ran = run(proof, "edited")
    assert edited.passed and not edited.reason.startswith("reused") and ran

    reworded = dataclasses.replace(proof, claims={"sum_of_ranks": Claim(says="reworded", control="no all-reduce")})
    _, ran = run(reworded, "reworded")
    assert ran  # the page's claim changed: the old evidence no longer speaks for it
