"""Defect 7: a session pruning old run folders never removes the folder of another live session."""

import subprocess
import sys
import textwrap

from verify.conftest import fresh_run_dir
from verify.paths import ROOT


def test_a_live_sessions_run_folder_survives_pruning_and_goes_once_it_ended(tmp_path):
    other = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from verify.conftest import fresh_run_dir
            print(fresh_run_dir(__import__("pathlib").Path({str(tmp_path)!r})), flush=True)
            time.sleep(60)
        """)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        live = tmp_path / __import__("pathlib").Path(other.stdout.readline().strip()).name
        assert live.is_dir()
        mine = fresh_run_dir(tmp_path, keep=0)  # before: removed every older folder, in use or not
        assert live.is_dir() and mine.is_dir()
    finally:
        other.kill()
        other.wait()
    fresh_run_dir(tmp_path, keep=0)
    assert not live.exists() and mine.exists()  # ended sessions' folders go; a live one (mine) stays
