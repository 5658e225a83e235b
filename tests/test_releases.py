"""The release matrix judges each claim against its declared range; a proof that cannot run is not a failure."""

import json

from verify.matrix import in_range, judge_release
from verify.pages import Claim, Proof


def write_evidence(folder, snippet, status, claims):
    folder.mkdir(parents=True, exist_ok=True)
    # a finished run's verdicts were judged on measured values (evidence records it as by_value)
    records = [{"id": cid, "passed": passed, "reason": reason, "by_value": status == "finished"}
               for cid, passed, reason in claims]  # fmt: skip
    (folder / "p").mkdir(parents=True, exist_ok=True)  # evidence of page p's proof
    (folder / "p" / f"{snippet[:-3]}.json").write_text(json.dumps({"status": status, "claims": records}))


def test_release_ranges_are_inclusive():
    assert in_range("1.9.0", "1.9.0", None) and in_range("1.8.1", None, "1.8.1")
    assert not in_range("1.8.1", "1.9.0", None) and not in_range("1.9.0", None, "1.8.1")
    assert in_range("0.17.1", None, None)


def test_each_outcome_is_checked_against_the_range(tmp_path):
    proof = Proof(
        page="p", snippet="s.py", snippets_dir=tmp_path,
        claims={
            "halves": Claim(says="halves", control="c", until="1.8.1"),
            "shrinks_by_tenth": Claim(says="x0.9", control="c", since="1.9.0"),
            "unranged": Claim(says="any", control="c"),
        },
    )  # fmt: skip
    write_evidence(tmp_path / "1.8.1", "s.py", "finished",
                   [("halves", True, "ok"), ("shrinks_by_tenth", True, "ok"), ("unranged", False, "measured 1")])
    rows = {row["claim"]: row for row in judge_release("1.8.1", [proof], tmp_path / "1.8.1")}
    assert rows["halves"]["verdict"] == "agrees"
    assert rows["shrinks_by_tenth"]["verdict"] == "holds outside its range"  # a false version statement
    assert rows["unranged"]["verdict"] == "shown"  # no range, no statement about other releases

    write_evidence(tmp_path / "1.9.0", "s.py", "finished",
                   [("halves", False, "measured"), ("shrinks_by_tenth", False, "measured"), ("unranged", True, "ok")])
    rows = {row["claim"]: row for row in judge_release("1.9.0", [proof], tmp_path / "1.9.0")}
    assert rows["halves"]["verdict"] == "agrees"
    assert rows["shrinks_by_tenth"]["verdict"] == "fails inside its range"


def test_a_proof_using_an_api_the_release_lacks_cannot_run_and_a_dead_launch_is_never_a_verdict(tmp_path):
    proof = Proof(page="p", snippet="s.py", claims={"new_api": Claim(says="x", control="c", since="1.0.0")},
                  snippets_dir=tmp_path)  # fmt: skip
    crash = "crashed: rank 0 raised:\nTraceback...\nImportError: cannot import name 'DataLoaderConfiguration'"
    write_evidence(tmp_path / "0.27.2", "s.py", "crashed", [("new_api", False, crash)])
    (row,) = judge_release("0.27.2", [proof], tmp_path / "0.27.2")
    assert (row["outcome"], row["verdict"]) == ("cannot run", "agrees")  # outside its range: as declared
    (row,) = judge_release("1.0.1", [proof], tmp_path / "0.27.2")
    assert row["verdict"] == "cannot run inside its range"
    write_evidence(tmp_path / "0.34.2", "s.py", "launch_failed", [("new_api", False, "ModuleNotFoundError: x")])
    (row,) = judge_release("0.34.2", [proof], tmp_path / "0.34.2")
    assert row["verdict"] == "launch failed"


def test_the_matrix_checks_every_release_before_running_any(monkeypatch, capsys):
    import pytest

    from verify import matrix

    ran = []
    monkeypatch.setattr(matrix, "release_dir", lambda release: ran.append(release))
    with pytest.raises(SystemExit) as stopped:
        matrix.main(["1.15.0", "abc"])  # before: 1.15.0 ran, then a traceback on abc
    assert stopped.value.code == 2 and ran == []
    assert "not release numbers: abc" in capsys.readouterr().err


def test_one_failing_release_does_not_stop_the_others_and_all_are_summarised(monkeypatch, tmp_path, capsys):
    from verify import matrix

    monkeypatch.setattr(matrix, "MATRIX_DIR", tmp_path)
    monkeypatch.setattr(matrix, "release_dir", lambda release: None)

    def child(command, env):
        release = command[3]
        if release == "1.8.1":
            return 1, False  # this release's run fails
        (tmp_path / release).mkdir(parents=True, exist_ok=True)
        (tmp_path / release / "matrix.json").write_text(json.dumps({"release": release, "claims": []}))
        return 0, False

    monkeypatch.setattr(matrix, "run_child", child)
    assert matrix.main(["1.8.1", "1.15.0"]) == 1
    out = capsys.readouterr().out
    assert "accelerate 1.15.0: 0 hold" in out  # the release after the failing one still ran
    assert "1 of 2 release(s) did not run to the end" in out and "accelerate 1.8.1: its run failed" in out
