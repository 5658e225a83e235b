"""Hostile snippets in one grouped launch: a detached grandchild, a flood to fd 1, a write into the
checkout. Each is noticed and named; nothing is left running; the launch log stays small."""

import os
import shutil
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.test_faults import alive_in_groups, harness, launchers_of, wait_for  # noqa: F401 (harness: the fixture)
from tests.test_harness import processes_under
from verify.reaper import kill_groups

HOSTILE = Path(__file__).parent / "faults" / "hostile" / "snippets" / "launch"
SNIPPETS = ["daemon_children.py", "floods_fd_one.py", "writes_into_checkout.py"]


def sleepers():
    """The daemon snippet's grandchildren (sleep 77700 and 77701), wherever they are."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if (process.info["cmdline"] or [])[:1] == ["sleep"] and process.info["cmdline"][1:] in (["77700"], ["77701"]):
            found.append(process)
    return found


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    from verify.pages import Claim, Proof
    from verify.runner import LaunchSettings
    from verify.session import verify_proofs

    snippets = tmp_path_factory.mktemp("hostile")  # a copy: the write into "the checkout" lands here
    for name in SNIPPETS:
        shutil.copy(HOSTILE / name, snippets / name)
    proofs = [Proof(page="hostile", snippet=name, snippets_dir=snippets, timeout=60,
                    claims={name[:-3]: Claim(says="x", control="none")}) for name in SNIPPETS]  # fmt: skip
    work = tmp_path_factory.mktemp("work")
    verdicts = verify_proofs(proofs, LaunchSettings(num_processes=2, use_cpu=True), work, "grouped", None)
    left = sleepers()
    kill_groups(left)  # before the fix they outlived the run: clean up, then fail on them below
    yield {claim: verdict for (_, _, claim), verdict in verdicts.items()}, work, left
    assert processes_under(work) == []


def test_a_detached_grandchild_is_found_killed_and_named(hostile):
    verdicts, _, left = hostile
    assert left == []
    reason = verdicts["daemon_children"].reason
    assert "snippet daemon_children left 2 process(es) running" in reason and "sleep 7770" in reason, reason
    assert "daemon_children left" not in verdicts["floods_fd_one"].reason


def test_output_written_to_fd_one_is_capped_in_the_launch_log(hostile):
    (log,) = hostile[1].rglob("launch.log")
    assert log.stat().st_size < 3_200_000  # before: 48 MB (24 MB from each rank)
    assert b"[output cut: " in log.read_bytes()


def test_a_snippet_writing_into_the_checkout_fails_its_launch_naming_the_file(hostile):
    verdicts = hostile[0]
    for claim in ("writes_into_checkout", "floods_fd_one"):
        assert not verdicts[claim].passed
        assert "injected_by_snippet.txt (new)" in verdicts[claim].reason, verdicts[claim].reason


def test_the_crash_story_pairs_each_rank_with_its_own_exit_code(tmp_path):
    # torchelastic's log when rank 0 exits with 3 and the agent then SIGTERMs rank 1: the agent's line
    # says "local_rank: 0" just before rank 1's block (before: paired 0 with -15)
    from verify.runner import Launch, LaunchSettings, Launchers, RankOutcome, SnippetSpec

    launch = Launch([SnippetSpec("s", "s.py", 10)], LaunchSettings(num_processes=2, use_cpu=True), tmp_path, "grouped")
    block = ("[{i}]:\n  time      : 2026-12-01_00:00:00\n  host      : box\n  rank      : {rank} (local_rank: {rank})\n"
             "  exitcode  : {code} (pid: 42{rank}) {name}\n  error_file: <N/A>\n  traceback : {why}\n")  # fmt: skip
    launch.log_path.write_text(
        "E1201 torch/distributed/elastic/multiprocessing/api.py:1003] failed (exitcode: 3) local_rank: 0 (pid: 420) "
        "of binary: python\nTraceback ...\nChildFailedError:\n====\nFailures:\n"
        + block.format(i=1, rank=1, code=-15, name="(SIGTERM)", why="Signal 15 (SIGTERM) received by PID 421")
        + "----\nRoot Cause (first observed failure):\n"
        + block.format(i=0, rank=0, code=3, name="", why="To enable traceback see: ...") + "====\n"
    )
    text = launch.crash_story({0: RankOutcome(rank=0), 1: RankOutcome(rank=1)}, Launchers([]))
    assert "rank 0 exited with code 3 while in this snippet" in text, text
    assert "rank 1 was killed by SIGTERM while in this snippet" in text, text
    assert "rank 0 was killed" not in text, text


def test_sigkill_of_the_harness_leaves_no_launcher_and_no_rank(harness):
    process, work, seen = harness
    (launcher,) = wait_for(lambda: launchers_of(process))
    ranks = wait_for(lambda: len(launcher.children()) >= 2 and launcher.children())
    seen += [launcher, *ranks]
    groups = {os.getpgid(p.pid) for p in seen}
    process.send_signal(signal.SIGKILL)  # no handler runs: only the kernel can end what it started
    process.wait(timeout=30)
    deadline = time.monotonic() + 20
    while alive_in_groups(groups) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert alive_in_groups(groups) == []  # before: launcher and ranks waited for gloo's 30-minute timeout
