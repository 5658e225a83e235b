from pathlib import Path

import pytest

from verify.pages import all_proofs, load_pages
from verify.runner import LaunchSettings
from verify.session import verify_proofs

BROKEN = Path(__file__).parent / "broken"


def broken_proofs():
    return all_proofs(load_pages(BROKEN / "docs", BROKEN / "snippets"))


@pytest.fixture(scope="session")
def grouped(tmp_path_factory):
    """The deliberately broken suite, run once in grouped mode: (verdicts, work folder)."""
    work_dir = tmp_path_factory.mktemp("grouped")
    verdicts = verify_proofs(broken_proofs(), LaunchSettings(num_processes=2), work_dir, "grouped", None)
    return verdicts, work_dir
