"""The harness under faults: whichever way a run ends, no process of it is left (checked by process
group, since the launcher and each rank lead groups of their own), and snippets run in a scratch folder."""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import BROKEN
from tests.test_harness import processes_under, verdict_of
from verify.paths import ROOT
from verify.reaper import kill_groups

HARNESS = textwrap.dedent("""
    import pathlib, sys
    from verify.pages import Claim, Proof
    from verify.runner import LaunchSettings
    from verify.session import verify_proofs

    snippets, work = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    proof = Proof(page="p", snippet="sleeps.py", snippets_dir=snippets, claims={"never": Claim(says="x")})
    verdicts = verify_proofs([proof], LaunchSettings(num_processes=2, use_cpu=True), work, "grouped", None)
    print(next(iter(verdicts.values())).reason, flush=True)
""")


def alive_in_groups(groups) -> list:
    found = []
    for process in psutil.process_iter(["status"]):
        try:
            if os.getpgid(process.pid) in groups and process.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(process)
        except ProcessLookupError:
            pass
    return found


def launchers_of(harness: subprocess.Popen) -> list:
    try:
        children = psutil.Process(harness.pid).children()
    except psutil.NoSuchProcess:
        return []
    return [child for child in children if "accelerate.commands.launch" in " ".join(child.cmdline())]


def wait_for(what, seconds=120.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def harness(tmp_path):
    """A harness process running one snippet that sleeps; whatever the test does, everything dies after."""
    (tmp_path / "snippets").mkdir()
    (tmp_path / "snippets" / "sleeps.py").write_text("import time\ntime.sleep(120)\n")
    work = tmp_path / "work"
    process = subprocess.Popen([sys.executable, "-c", HARNESS, str(tmp_path / "snippets"), str(work)], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
    seen: list = []
    yield process, work, seen
    process.kill()
    process.wait()
    kill_groups(seen + processes_under(work))  # clean up what a failing run left


def test_sigterm_to_the_harness_kills_the_launcher_and_every_rank(harness):
    process, work, seen = harness
    (launcher,) = wait_for(lambda: launchers_of(process))
    # SIGTERM while the ranks start up (where they waited in their rendezvous for a minute, re-parented)
    ranks = wait_for(lambda: len(launcher.children()) >= 2 and launcher.children())
    seen += [launcher, *ranks]
    groups = {os.getpgid(p.pid) for p in seen}
    assert len(groups) >= 3  # the launcher's session and one per rank (torch starts each rank in its own)
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)
    time.sleep(0.5)
    assert alive_in_groups(groups) == [] and processes_under(work) == []


def test_a_launcher_killed_at_startup_takes_its_ranks_with_it(harness):
    process, work, seen = harness
    (launcher,) = wait_for(lambda: launchers_of(process))
    ranks = wait_for(lambda: len(launcher.children()) >= 2 and launcher.children())  # started, not yet ready
    seen += [launcher, *ranks]
    groups = {os.getpgid(p.pid) for p in ranks}
    launcher.kill()  # its ranks re-parent; before, they waited in their rendezvous for a minute
    out, _ = process.communicate(timeout=60)
    assert "launch_failed" in out or "crashed" in out, out
    time.sleep(0.5)
    assert alive_in_groups(groups) == [] and processes_under(work) == []


def test_snippets_write_into_a_scratch_folder_not_the_checkout(grouped):
    assert verdict_of(grouped[0], "broken", "runs_in_scratch").passed
    strays = ["stray-file-from-a-snippet-rank0.txt", "stray-file-from-a-snippet-rank1.txt"]
    leaked = [ROOT / name for name in strays if (ROOT / name).exists()] + [
        Path.cwd() / name for name in strays if (Path.cwd() / name).exists()]  # fmt: skip
    for path in leaked:
        path.unlink()
    assert leaked == []
    assert sorted(path.name for path in grouped[1].rglob("stray-file-*")) == strays


RUNAWAYS = {
    "prints_a_lot.py": "import _claims\nprint('x' * 5_000_000)\n"
                       "_claims.equal('printed', measured=1.0, control=0.0, expected=1.0)\n",
    # grows by 1 GB/s on rank 0, up to 3 GB (so that a harness without a guard does not take the machine)
    "eats_memory.py": "import os, time\nheld = []\nwhile True:\n    if os.environ['RANK'] == '0' and len(held) < 60:\n"
                      "        held.append(bytearray(b'x') * 50_000_000)\n    time.sleep(0.05)\n",
}


@pytest.fixture(scope="module")
def runaways(tmp_path_factory):
    """One grouped launch: a snippet printing 5 MB, then one eating memory."""
    from verify.pages import Claim, Proof
    from verify.runner import LaunchSettings
    from verify.session import verify_proofs

    snippets = tmp_path_factory.mktemp("snippets")
    shutil.copy(BROKEN / "snippets" / "_claims.py", snippets / "_claims.py")
    proofs = []
    for name, code in RUNAWAYS.items():
        (snippets / name).write_text(code)
        claim = "printed" if name == "prints_a_lot.py" else "never"
        proofs.append(Proof(page="p", snippet=name, snippets_dir=snippets, timeout=20,
                            claims={f"{claim}_{name[:-3]}" if claim == "never" else claim: Claim(says="x")}))
    work = tmp_path_factory.mktemp("work")
    settings = LaunchSettings(num_processes=2, use_cpu=True, memory_limit_mb=1500)
    verdicts = verify_proofs(proofs, settings, work, "grouped", None)
    yield {claim: verdict for (_, _, claim), verdict in verdicts.items()}, work
    assert processes_under(work) == []


def test_a_snippets_output_is_capped_and_says_so(runaways):
    verdicts, work = runaways
    assert verdicts["printed"].passed, verdicts["printed"].reason
    logs = list(work.rglob("prints_a_lot.rank*.log"))
    assert len(logs) == 2 and all(log.stat().st_size < 1_100_000 for log in logs)  # before: 5 MB each
    assert all("[output cut: " in log.read_text() for log in logs)


def test_a_killed_rank_is_named_in_the_verdict(tmp_path):
    # torch's elastic agent writes this summary to the launch log (torch/distributed/elastic/multiprocessing/
    # errors/__init__.py, _FAILURE_FORMAT_TEMPLATE); a real launch would cost ~10 s for the same text.
    from verify.runner import Launch, LaunchSettings, Launchers, RankOutcome, SnippetSpec

    launch = Launch([SnippetSpec("s", "s.py", 10)], LaunchSettings(num_processes=2, use_cpu=True), tmp_path, "grouped")
    launch.log_path.write_text(
        "[0]:\n  time      : 2026-12-01_00:00:00\n  host      : box\n  rank      : 1 (local_rank: 1)\n"
        "  exitcode  : -9 (pid: 4242)\n  error_file: <N/A>\n  traceback : Signal 9 (SIGKILL) received by PID 4242\n"
    )
    ranks = {0: RankOutcome(rank=0), 1: RankOutcome(rank=1)}
    text = launch.crash_story(ranks, Launchers([]))
    assert "rank 1 was killed by SIGKILL while in this snippet" in text, text


def test_a_rank_past_the_memory_limit_is_stopped_and_named(runaways):
    text = runaways[0]["never_eats_memory"].reason
    assert "rank 0 ran out of memory (limit 1500 MiB per rank)" in text, text
