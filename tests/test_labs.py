"""The lab runner of `pytest verify`: a failing cell fails the lab, naming it and the cell; a lab
whose workers did not form the world asked for fails like a snippet would; real labs are well formed."""

from pathlib import Path

import jupytext
import pytest

from verify.labs import LABS_DIR, lab_paths, read_lab, verify_labs

BROKEN_LABS = Path(__file__).parent / "broken" / "labs"


@pytest.fixture(scope="module")
def broken_verdicts(tmp_path_factory):
    labs = [read_lab(BROKEN_LABS / name) for name in ("failing_cell.py", "lone_world.py")]
    executed = tmp_path_factory.mktemp("executed")
    verdicts = verify_labs(labs, tmp_path_factory.mktemp("work"), evidence_dir=None, executed_dir=executed).verdicts
    return verdicts, executed


def test_a_failing_cell_fails_the_lab_naming_the_lab_and_the_cell(broken_verdicts):
    verdict = broken_verdicts[0][("failing_cell", "failing_cell.py", "never_reported")]
    assert not verdict.passed
    assert "failing_cell.py" in verdict.reason
    assert "cell 3 ('ratio = 1 / 0  # fails on purpose') raised ZeroDivisionError" in verdict.reason
    assert (broken_verdicts[1] / "failing_cell.ipynb").exists()  # the executed copy shows the error


def test_a_lab_whose_workers_ran_alone_fails_on_world_size_and_backend(broken_verdicts):
    verdict = broken_verdicts[0][("lone_world", "lone_world.py", "holds_but_alone")]
    assert not verdict.passed
    assert "asked for 2 processes, ranks [0] ran" in verdict.reason
    assert "backend None, expected gloo" in verdict.reason


@pytest.mark.parametrize("path", lab_paths(LABS_DIR), ids=lambda p: p.stem)
def test_each_lab_is_a_clean_percent_notebook_that_declares_its_claims(path):
    lab = read_lab(path)
    notebook = jupytext.read(path)
    assert lab.processes == 2 and lab.claims
    assert all(claim.control for claim in lab.claims.values()), f"{path.name}: a claim without control"
    source = path.read_text()
    for claim_id in lab.claims:
        assert f'"{claim_id}"' in source, f"{path.name} never reports {claim_id}"
    assert "notebook_launcher" in source, f"{path.name} does not launch processes from the notebook"
    assert not any(cell.get("outputs") for cell in notebook.cells), "outputs are never committed"
    assert notebook.cells[0].cell_type == "markdown" and notebook.cells[0].source.startswith("# ")
