from pathlib import Path

import pytest

from verify.pages import Claim, Proof, all_proofs, load_pages
from verify.runner import LaunchSettings
from verify.session import verify_proofs

BROKEN = Path(__file__).parent / "broken"


def broken_proofs():
    return all_proofs(load_pages(BROKEN / "docs", BROKEN / "snippets")) + duplicate_id_proofs()


def duplicate_id_proofs():
    """Two proofs of one page reporting the same claim id, built past the loader (which refuses them):
    the harness must still judge each on its own, so the false one cannot pass behind the true one."""
    claims = {"same": Claim(says="reported by both", control="none")}
    return [Proof(page="duplicate", snippet=name, claims=claims, snippets_dir=BROKEN / "snippets")
            for name in ("zz_false.py", "zz_true.py")]  # fmt: skip


@pytest.fixture(scope="session")
def grouped(tmp_path_factory):
    """The deliberately broken suite, run once in grouped mode: (verdicts, work folder)."""
    work_dir = tmp_path_factory.mktemp("grouped")
    verdicts = verify_proofs(broken_proofs(), LaunchSettings(num_processes=2), work_dir, "grouped", None)
    return verdicts, work_dir
