"""Defect 4: an evidence file that is truncated or not JSON is treated as missing (naming the file),
its proof runs again, and nothing that reads evidence (the session, the matrix, the site) crashes;
evidence is written whole or not at all."""

import json

import pytest

from tests.conftest import BROKEN
from verify import evidence
from verify.matrix import judge_release
from verify.pages import Claim, Proof
from verify.runner import LaunchSettings

PROOF = Proof(page="p", snippet="passing_claim.py", snippets_dir=BROKEN / "snippets",
              claims={"sum_of_ranks": Claim(says="1 + 2 = 3", control="no all-reduce", until="1.0.0")})  # fmt: skip
SETTINGS = LaunchSettings(num_processes=2, use_cpu=True)


@pytest.mark.parametrize("content", ['{"page": "p", "claims": [{"id"', "not json at all", "[]", "\xff\xfe"])
def test_a_corrupt_evidence_file_is_missing_named_and_rerun(tmp_path, content):
    path = evidence.path_of("p", "passing_claim.py", tmp_path)
    path.parent.mkdir()
    path.write_bytes(content.encode("latin-1"))
    with pytest.warns(evidence.UnreadableEvidence, match=str(path)):
        assert evidence.read(PROOF, tmp_path) is None
    with pytest.warns(evidence.UnreadableEvidence):
        assert evidence.reused_verdicts(PROOF, SETTINGS, tmp_path) is None  # so the session runs it again
    with pytest.warns(evidence.UnreadableEvidence):
        (row,) = judge_release("1.15.0", [PROOF], tmp_path)
    assert row["outcome"] == "not run"


def test_evidence_is_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    record = {"page": "p", "snippet": "passing_claim.py", "claims": []}
    path = evidence.write(record, tmp_path)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(evidence.os, "replace", interrupted)  # stopped between writing and renaming
    with pytest.raises(KeyboardInterrupt):
        evidence.write({**record, "claims": [{"id": "new"}]}, tmp_path)
    assert json.loads(path.read_text()) == record  # the old record, whole
