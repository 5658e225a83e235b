"""Labs under faults: the declared timeout is the whole lab's budget; an interrupt stops a lab at once
and writes nothing for it; a hang, a dead kernel or a lab that reports nothing each say so, naming the cell."""

import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from verify.labs import read_lab, verify_labs
from verify.paths import ROOT
from verify.reaper import kill_groups


def write_lab(folder, name, timeout, cells):
    header = textwrap.dedent(f"""\
        # ---
        # jupyter:
        #   kernelspec:
        #     display_name: Python 3
        #     language: python
        #     name: python3
        #   proof:
        #     processes: 2
        #     timeout: {timeout}
        #     claims:
        #       some_claim: {{says: s, control: c}}
        # ---
        """)
    path = folder / f"{name}.py"
    path.write_text(header + "".join(f"\n# %%\n{cell}\n" for cell in cells))
    return path


@pytest.fixture(scope="module")
def lab_verdicts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("labs")
    labs = [
        # three cells of 2 s under a 3 s budget: each cell fits, the lab does not
        read_lab(write_lab(folder, "slow_cells", 3, ["import time\ntime.sleep(2)"] * 3)),
        read_lab(write_lab(folder, "kernel_dies", 30, ["x = 1", "import os\nos._exit(3)"])),
        read_lab(write_lab(folder, "prints_a_lot", 30, ["print('x' * 3_000_000)"])),
    ]
    executed = tmp_path_factory.mktemp("executed")
    verdicts = verify_labs(labs, tmp_path_factory.mktemp("work"), evidence_dir=None, executed_dir=executed).verdicts
    return {**verdicts, "executed": executed}


def reason(verdicts, lab):
    verdict = verdicts[(lab, f"{lab}.py", "some_claim")]
    assert not verdict.passed
    return verdict.reason


def test_a_labs_timeout_is_an_overall_deadline_naming_the_running_cell(lab_verdicts):
    text = reason(lab_verdicts, "slow_cells")
    assert "hung" in text and "did not finish within 3 s" in text and "cell 2 ('import time')" in text, text


def test_a_lab_that_reports_nothing_says_so(lab_verdicts):
    assert "no cell reported a claim" in reason(lab_verdicts, "prints_a_lot")


def test_a_dead_kernel_names_its_cell(lab_verdicts):
    text = reason(lab_verdicts, "kernel_dies")
    assert "the kernel died in cell 2 ('import os')" in text, text


RUN_ONE_LAB = textwrap.dedent("""
    import pathlib, sys
    from verify.labs import read_lab
    from verify.runner import LaunchSettings
    from verify.session import verify_all

    lab, work = read_lab(pathlib.Path(sys.argv[1])), pathlib.Path(sys.argv[2])
    verify_all([lab], LaunchSettings(num_processes=2, use_cpu=True), work,
               evidence_dir=work / "evidence", executed_dir=work / "executed")
""")


def test_ctrl_c_stops_a_lab_at_once_and_records_nothing(tmp_path):
    started = tmp_path / "cell-started"
    lab = write_lab(tmp_path, "sleeper", 90, [f"open({str(started)!r}, 'w').close()\nimport time\ntime.sleep(80)"])
    work = tmp_path / "work"
    run = subprocess.Popen([sys.executable, "-c", RUN_ONE_LAB, str(lab), str(work)], cwd=ROOT)
    kernels = []
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists()
        kernels = psutil.Process(run.pid).children(recursive=True)
        run.send_signal(signal.SIGINT)
        stopped_at = time.monotonic()
        run.wait(timeout=30)
        assert time.monotonic() - stopped_at < 10  # before: it waited for the cell's own timeout
        assert not (work / "evidence").exists() or list((work / "evidence").iterdir()) == []
        assert not (work / "executed").exists() or list((work / "executed").iterdir()) == []
        time.sleep(0.5)
        assert [kernel for kernel in kernels if kernel.is_running() and kernel.status() != psutil.STATUS_ZOMBIE] == []
    finally:
        run.kill()
        run.wait()
        kill_groups(kernels)


def test_a_labs_output_is_capped_in_the_executed_notebook(lab_verdicts):
    notebook = lab_verdicts["executed"] / "prints_a_lot.ipynb"
    assert notebook.stat().st_size < 300_000  # before: the whole 3 MB went into the notebook and the page
    assert "[output cut: " in notebook.read_text()
