"""Labs under faults: the memory limit holds for a kernel and its forks and is the one recorded; a world
the notebook reports but never started fails; a notebook's total output is capped; an executed notebook
is written whole or not at all, and the site passes over one it cannot read."""

import json
import warnings

import pytest

from tests.test_lab_faults import write_lab
from verify import evidence
from verify.labs import read_lab, verify_labs, write_notebook
from verify.website import lab_pages

FAKE_WORLD = ("import _claims\n_claims.equal('some_claim', measured=1.0, control=0.0, expected=1.0, "
              "world=[{'rank': r, 'world_size': 2, 'num_processes': 2, 'backend': 'gloo'} for r in (0, 1)])")  # fmt: skip
EATS_MEMORY = "import time\nheld = []\nfor _ in range(40):\n    held.append(b'x' * 20_000_000)\n    time.sleep(0.05)"
FLOODS = "from IPython.display import HTML, display\nfor _ in range(60):\n    display(HTML('<p>' + 'x' * 90000 + '</p>'))"


@pytest.fixture(scope="module")
def hostile_labs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("labs")
    labs = [read_lab(write_lab(folder, name, 60, [cell]))
            for name, cell in [("fake_world", FAKE_WORLD), ("eats_memory", EATS_MEMORY), ("floods", FLOODS)]]  # fmt: skip
    executed, evidence_dir = tmp_path_factory.mktemp("executed"), tmp_path_factory.mktemp("evidence")
    verdicts = verify_labs(labs, tmp_path_factory.mktemp("work"), evidence_dir=evidence_dir, executed_dir=executed,
                           memory_limit_mb=300).verdicts  # fmt: skip
    return {lab: verdicts[(lab, f"{lab}.py", "some_claim")] for lab in ("fake_world", "eats_memory", "floods")}, \
        executed, evidence_dir


def test_a_lab_past_the_memory_limit_is_stopped_and_its_limit_recorded(hostile_labs):
    verdicts, _, evidence_dir = hostile_labs
    reason = verdicts["eats_memory"].reason
    assert "ran out of memory (limit 300 MiB" in reason, reason  # before: the limit was ignored
    recorded = evidence.read_json(evidence.path_of("eats_memory", "eats_memory.py", evidence_dir))
    assert '"memory_limit_mb": 300' in json.dumps(recorded)  # before: 4096


def test_a_world_the_notebook_reports_but_never_started_fails(hostile_labs):
    reason = hostile_labs[0]["fake_world"].reason
    assert not hostile_labs[0]["fake_world"].passed
    assert "report a world of 2 workers, but the kernel started 0 process(es)" in reason, reason


def test_a_notebooks_total_output_is_capped(hostile_labs):
    notebook = hostile_labs[1] / "floods.ipynb"
    assert notebook.stat().st_size < 2_600_000  # before: 5.4 MB (60 outputs of 90 kB)
    assert "[output cut: " in notebook.read_text()


def test_a_notebook_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    import nbformat

    path = tmp_path / "lab.ipynb"
    write_notebook(nbformat.v4.new_notebook(), path)
    before = path.read_bytes()

    def fails_halfway(notebook, file, *args, **kwargs):
        file.write('{"cells": [')
        raise OSError("disk full")

    monkeypatch.setattr(nbformat, "write", fails_halfway)
    with pytest.raises(OSError):
        write_notebook(nbformat.v4.new_notebook(), path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["lab.ipynb"]


def test_the_site_passes_over_an_unreadable_executed_notebook_naming_it(tmp_path, monkeypatch):
    import nbformat

    mine, reference = tmp_path / "executed", tmp_path / "reference"
    (reference / "labs").mkdir(parents=True)
    mine.mkdir()
    whole = nbformat.writes(nbformat.v4.new_notebook())
    (mine / "lab9.ipynb").write_text(whole[: len(whole) // 3])  # a notebook cut short
    (reference / "labs" / "lab9.ipynb").write_text(whole)
    monkeypatch.setattr(lab_pages._labs, "EXECUTED_DIR", mine)
    monkeypatch.setattr(lab_pages._evidence, "REFERENCE_EVIDENCE_DIR", reference)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert lab_pages.executed_copy("lab9") == reference / "labs" / "lab9.ipynb"
        assert lab_pages.cleaned_copy(mine / "lab9.ipynb", tmp_path / "cache") == mine / "lab9.ipynb"  # no crash
    assert any(str(mine / "lab9.ipynb") in str(w.message) for w in caught)
