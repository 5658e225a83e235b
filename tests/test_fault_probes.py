"""The fault suite, round 4 (../shared/review/audits/2026-12-01/harness-faults.md): each probe of the
report that found a defect, kept as a test that failed on the code of that day.

Most checks are judge-level, on hand-made records; the few real launches share one grouped run of the
hostile pages in tests/faults/ (never under docs/ or snippets/, so they never reach the site) and one
rerun under a changed environment.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from tests.conftest import BROKEN
from verify import environment, evidence, mutation
from verify.judge import judge, judge_mutant
from verify.labs import LabProof, kernel_environment
from verify.pages import Claim, Proof, all_proofs, load_page, load_pages
from verify.paths import REFERENCE_DIR, ROOT
from verify.runner import LaunchSettings, RankOutcome, SnippetRun
from verify.session import unknown_mutant, verify_proofs

FAULTS = Path(__file__).parent / "faults"
CPU = LaunchSettings(num_processes=2, use_cpu=True)
GOOD_STATE = {"torch_world_size": 2, "accelerate_num_processes": 2, "backend": "gloo"}
PROOF = Proof(page="p", snippet="passing_claim.py", snippets_dir=BROKEN / "snippets",
              claims={"c": Claim(says="a claim", control="c")})  # fmt: skip


def finished_run(report: dict) -> SnippetRun:
    ranks = {r: RankOutcome(rank=r, state=GOOD_STATE, reports=[{"claim": "c", **report, "rank": r}], finished=True)
             for r in (0, 1)}  # fmt: skip
    return SnippetRun("passing_claim", "passing_claim.py", "finished", ranks)


def verdict_on(measured, control, op, bound):
    (verdict,) = judge(PROOF, finished_run({"measured": measured, "control": control, "op": op, "bound": bound}), CPU)
    return verdict


# --- N1: a verdict needs two measurements --------------------------------------------------------


@pytest.mark.parametrize(
    "control, op, bound, words",
    [
        (None, "==", 3.0, "the control measured nothing (None)"),
        ("nan", "<=", 0.5, "the control measured nothing ('nan')"),  # how _claims writes a float NaN
        (float("nan"), "<=", 0.5, "the control measured nothing (nan)"),
        ("inf", ">=", 0.5, "the control measured nothing ('inf')"),
        ("RuntimeError: the control's path crashed", "==", 3.0, "values of different kinds are not compared"),
        (None, "in", [0.0, 1.0], "the control measured nothing (None)"),
        ("x", "in", [0.0, 1.0], "the control is text ('x'), the bound number"),
        ([1.0], "==", 3.0, "the control is list"),
    ],
)  # fmt: skip
def test_n1_a_control_that_measured_nothing_fails_the_claim_named(control, op, bound, words):
    measured = 0.5 if op == "in" else (3.0 if op == "==" else (0.0 if op == "<=" else 1.0))
    verdict = verdict_on(measured, control, op, bound)
    assert not verdict.passed, "a claim whose control never ran must not pass"
    assert "not measured: " in verdict.reason and words in verdict.reason, verdict.reason


def test_n1_a_measurement_of_another_kind_than_the_bound_is_not_compared():
    verdict = verdict_on("3.0", 1.0, "==", 3.0)
    assert not verdict.passed and "the measurement is text ('3.0'), the bound number (3.0)" in verdict.reason


def test_n1_a_sentinel_of_the_bounds_kind_is_a_measurement():
    # job_fails_once_restarts_are_spent: the control's "nothing was raised" is the string "no exception"
    assert verdict_on("ChildFailedError", "no exception", "==", "ChildFailedError").passed
    assert verdict_on(3, 2.0, "==", 3.0).passed  # int and float are one kind: numbers
    assert verdict_on([0, 1], [1, 0], "==", [0, 1]).passed
    assert not verdict_on(True, 1, "==", True).passed  # a boolean is not a number


def test_n1_the_snippets_own_reporter_agrees_and_never_raises_across_kinds():
    from verify.judge import _claims  # snippets/_claims.py: what a snippet prints when run by hand

    def passed(measured, control, op, bound):
        return _claims.verdict({"measured": measured, "control": control, "op": op, "bound": bound})[0]

    assert not passed(3.0, None, "==", 3.0)
    assert not passed(0.1, "crashed", "<=", 0.5)  # `"crashed" <= 0.5` would raise TypeError in the snippet
    assert passed("ChildFailedError", "no exception", "==", "ChildFailedError")


def test_n1_under_a_mutant_a_control_that_measured_nothing_is_no_catch():
    proof = dataclasses.replace(PROOF, claims={"c": Claim(says="a claim", control="c", breaks_when=("m",),
                                                          through_control=("m",))})  # fmt: skip
    mutant = mutation.Mutant("m", "a made-up bug", lambda patch: None, Path("x"))
    run = finished_run({"measured": 3.0, "control": None, "op": "==", "bound": 3.0})
    for outcome in run.ranks.values():
        outcome.mutant_reached = True
    verdict = judge_mutant(proof, mutant, run, CPU)
    assert verdict.status == "survived" and not verdict.claims["c"]["killed"], verdict.reason


def test_n1_no_reference_evidence_holds_a_plain_claim_the_rule_rejects():
    from verify.judge import not_measured

    rejected = [(path.parent.name, path.name, claim["id"], problem)
                for path in sorted(REFERENCE_DIR.glob("*/*.json"))
                for claim in json.loads(path.read_text())["claims"] if claim["passed"]
                for report in claim["reports"] if (problem := not_measured(report))]  # fmt: skip
    assert rejected == []  # the restarts proof's control, once None, reports "no exception" since


# --- N33: the user's environment -----------------------------------------------------------------

LEAKS = {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "4", "ACCELERATE_USE_FSDP": "true", "ACCELERATE_MIXED_PRECISION": "fp16",
         "TORCHELASTIC_RESTART_COUNT": "3", "RANK": "5", "LOCAL_RANK": "5", "WORLD_SIZE": "9", "GROUP_RANK": "1",
         "MASTER_PORT": "1", "FSDP_STATE_DICT_TYPE": "FULL_STATE_DICT", "PARALLELISM_CONFIG_TP_SIZE": "2"}  # fmt: skip


def test_n33_accelerate_and_launcher_variables_never_reach_a_rank_or_a_kernel(monkeypatch):
    for name, value in LEAKS.items():
        monkeypatch.setenv(name, value)
    for env in (CPU.environment(), kernel_environment("report-{rank}.jsonl")):
        assert not set(LEAKS) & set(env), sorted(set(LEAKS) & set(env))
    assert CPU.environment()["ACCELERATE_USE_CPU"] == "true"  # what the harness sets itself stays


FAMILIES = {"TORCH_DISTRIBUTED_DEBUG": "DETAIL", "TORCHINDUCTOR_CACHE_DIR": "/tmp/x", "PYTORCH_NO_CUDA_MEMORY_CACHING": "1",
            "NCCL_DEBUG": "INFO", "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2",
            "KMP_AFFINITY": "compact", "OPENBLAS_NUM_THREADS": "2", "PYTHONHASHSEED": "7", "PYTHONPATH": "/elsewhere",
            "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "debug",
            "TOKENIZERS_PARALLELISM": "false", "LD_PRELOAD": "libjemalloc.so"}  # fmt: skip


@pytest.fixture
def passing_evidence(tmp_path):
    """Evidence of PROOF in which every claim held, as a run under the current environment records it."""
    run = finished_run({"measured": 3.0, "control": 1.0, "op": "==", "bound": 3.0})
    evidence.write(evidence.record(PROOF, run, judge(PROOF, run, CPU), CPU), tmp_path)
    return tmp_path


@pytest.mark.parametrize("name", FAMILIES)
def test_n33_each_family_that_can_change_a_result_is_fingerprinted_and_recorded(name, passing_evidence, monkeypatch):
    assert evidence.reusable(PROOF, CPU, passing_evidence) is not None  # nothing changed: reused
    monkeypatch.setenv(name, FAMILIES[name] + ("-changed" if os.environ.get(name) == FAMILIES[name] else ""))
    assert evidence.reusable(PROOF, CPU, passing_evidence) is None, f"{name} changed, yet the old pass was reused"
    run = finished_run({"measured": 3.0, "control": 1.0, "op": "==", "bound": 3.0})
    assert name in evidence.record(PROOF, run, judge(PROOF, run, CPU), CPU)["environment"]


def test_n33_a_scrubbed_variable_cannot_change_a_result_so_it_leaves_the_fingerprint_alone(passing_evidence, monkeypatch):
    monkeypatch.setenv("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "4")
    assert evidence.reusable(PROOF, CPU, passing_evidence) is not None


def test_n33_every_family_is_matched_by_the_environment_rules():
    assert set(environment.that_matters(FAMILIES)) == set(FAMILIES)
    assert environment.scrubbed(LEAKS) == {}


# --- N8: evidence keyed by page and snippet ------------------------------------------------------


def test_n8_two_pages_naming_one_snippet_keep_separate_evidence(tmp_path):
    run = finished_run({"measured": 3.0, "control": 1.0, "op": "==", "bound": 3.0})
    first, second = PROOF, dataclasses.replace(PROOF, page="q", claims={"c": Claim(says="page q's own words")})
    for proof in (first, second):
        evidence.write(evidence.record(proof, run, judge(proof, run, CPU), CPU), tmp_path)
    assert evidence.read(first, tmp_path)["page"] == "p" and evidence.read(second, tmp_path)["page"] == "q"
    assert evidence.read(second, tmp_path)["claims"][0]["statement"] == "page q's own words"


def test_n8_one_page_naming_a_snippet_twice_is_refused(tmp_path):
    (tmp_path / "twice.md").write_text(PAGE + "  - snippet: a.py\n    claims:\n      c2: second\n---\n")
    page = load_page(tmp_path / "twice.md", tmp_path)
    assert page.error and "snippet a.py is named by two proofs" in page.error


def test_n8_a_lab_and_a_snippet_of_the_same_stem_keep_separate_evidence(tmp_path):
    lab = LabProof(page="lab_x", snippet="lab_x.py", claims=PROOF.claims, snippets_dir=tmp_path)
    snippet = Proof(page="a-page", snippet="lab_x.py", claims=PROOF.claims, snippets_dir=tmp_path)
    assert evidence.path_of(lab.page, lab.snippet, tmp_path) != evidence.path_of(snippet.page, snippet.snippet, tmp_path)


# --- the real launches: one grouped run of tests/faults/, then a rerun under another environment ---


@pytest.fixture(scope="module")
def fault_run(tmp_path_factory):
    """tests/faults/ run once, grouped, with ACCELERATE_GRADIENT_ACCUMULATION_STEPS=4 in the user's shell."""
    proofs = all_proofs(load_pages(FAULTS / "docs", FAULTS / "snippets"))
    folder = tmp_path_factory.mktemp("faults")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "4")
        patch.setenv("ACCELERATE_USE_FSDP", "true")
        verdicts = verify_proofs(proofs, CPU, folder / "work", "grouped", folder / "evidence", reuse_evidence=True)
    return proofs, verdicts, folder


def test_n1_real_run_controls_that_measured_nothing_fail_and_a_sentinel_passes(fault_run):
    _, verdicts, _ = fault_run
    by_claim = {claim: verdict for (page, _, claim), verdict in verdicts.items() if page == "control-measured-nothing"}
    for claim in ("control_none", "control_nan", "control_text_against_a_number"):
        assert not by_claim[claim].passed and "not measured: the control" in by_claim[claim].reason, by_claim[claim].reason
    assert by_claim["control_sentinel_of_the_bounds_kind"].passed, by_claim["control_sentinel_of_the_bounds_kind"].reason


def test_n8_real_run_both_pages_of_one_snippet_keep_their_evidence(fault_run):
    proofs, verdicts, folder = fault_run
    shared = [proof for proof in proofs if proof.snippet == "shared_by_two_pages.py"]
    assert sorted(proof.page for proof in shared) == ["shared-a", "shared-b"]
    for proof in shared:
        assert verdicts[(proof.page, proof.snippet, "shared_sum")].passed
        found = evidence.read(proof, folder / "evidence")
        assert found["page"] == proof.page and evidence.matches_claims(found, proof.claims), found["page"]


def test_n33_real_run_the_users_accelerate_variables_do_not_reach_the_rank(fault_run):
    proofs, verdicts, folder = fault_run
    verdict = verdicts[("environment-default", "accumulation_default.py", "accumulation_default_is_one")]
    assert verdict.passed, verdict.reason  # measured 1 although the shell said 4
    (proof,) = [proof for proof in proofs if proof.page == "environment-default"]
    assert "ACCELERATE_GRADIENT_ACCUMULATION_STEPS" not in evidence.read(proof, folder / "evidence")["environment"]


def test_n33_real_rerun_reuse_under_a_changed_variable_runs_the_proof_again(fault_run, monkeypatch):
    proofs, _, folder = fault_run
    (proof,) = [proof for proof in proofs if proof.page == "environment-default"]
    unchanged = verify_proofs([proof], CPU, folder / "unchanged", "grouped", folder / "evidence", reuse_evidence=True)
    assert next(iter(unchanged.values())).reason.startswith("reused") and not list((folder / "unchanged").rglob("manifest.json"))
    monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "OFF" if os.environ.get("TORCH_DISTRIBUTED_DEBUG") != "OFF" else "INFO")
    again = verify_proofs([proof], CPU, folder / "changed", "grouped", folder / "evidence", reuse_evidence=True)
    (verdict,) = again.values()
    assert verdict.passed and not verdict.reason.startswith("reused") and list((folder / "changed").rglob("manifest.json"))


# --- N28: a _mutants.py that raises at import ------------------------------------------------------


@pytest.fixture
def raising_catalogue(tmp_path):
    snippets = tmp_path / "snippets"
    (snippets / "zzbroken").mkdir(parents=True)
    (snippets / "zzbroken" / "_mutants.py").write_text('raise RuntimeError("probe: this _mutants.py raises at import")\n')
    (snippets / "zzbroken" / "s.py").write_text("print('a snippet')\n")
    return snippets


def test_n28_a_raising_mutant_catalogue_fails_only_the_proofs_that_name_its_mutants(raising_catalogue):
    plain = Proof(page="p", snippet="s.py", snippets_dir=raising_catalogue, claims={"c": Claim(says="s", control="c")})
    naming = dataclasses.replace(plain, claims={"c": Claim(says="s", control="c", breaks_when=("zz-leaky",))})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        evidence.fingerprint(plain, CPU)  # a plain proof's evidence is written as usual
        evidence.fingerprint(naming, CPU)  # the site and the fingerprint: named, not a crash
    named = str(raising_catalogue / "zzbroken" / "_mutants.py")
    assert any(named in str(w.message) and "probe: this _mutants.py raises" in str(w.message) for w in caught)
    assert mutation.catalogue_for(naming).keys() == mutation.catalogue().keys()  # the others still load
    verdict = unknown_mutant(naming, "zz-leaky")
    assert verdict.status == "not_run" and named in verdict.reason and "RuntimeError" in verdict.reason


# --- R1: a crashed ranged claim outside its range ----------------------------------------------------


def test_r1_a_crashed_claim_outside_its_range_shows_a_failed_row():
    from verify.website import evidence_box

    crashed = {"id": "c", "passed": False, "by_value": False, "expected_here": False,
               "reason": "crashed: rank 0 raised: ValueError"}  # fmt: skip
    kind, words = evidence_box.verdict_words(crashed, Claim(says="s", until="1.0.0"))
    assert kind == "failed" and "crashed: nothing was measured" in words
    measured = {**crashed, "by_value": True}
    assert evidence_box.verdict_words(measured, Claim(says="s", until="1.0.0"))[0] == "held"


# --- bad input: pages ---------------------------------------------------------------------------------

PAGE = "---\ntitle: t\nproofs:\n  - snippet: a.py\n    claims:\n      c1: first\n"


def test_n11_a_page_with_a_byte_order_mark_keeps_its_proofs(tmp_path):
    (tmp_path / "bom.md").write_bytes(b"\xef\xbb\xbf" + (PAGE + "---\n").encode())
    page = load_page(tmp_path / "bom.md", tmp_path)
    assert page.error is None and [proof.snippet for proof in page.proofs] == ["a.py"]


def test_n9_a_claim_declared_twice_is_refused_naming_both_lines(tmp_path):
    (tmp_path / "dup.md").write_text(PAGE + "      c1: second\n---\n")
    page = load_page(tmp_path / "dup.md", tmp_path)
    assert page.error and "'c1' declared twice (lines 6 and 7)" in page.error and page.proofs == ()


def test_n10_a_release_range_with_no_release_in_it_is_refused(tmp_path):
    (tmp_path / "empty.md").write_text(PAGE.replace("c1: first", 'c1: {says: s, since: "2.0.0", until: "1.0.0"}') + "---\n")
    page = load_page(tmp_path / "empty.md", tmp_path)
    assert page.error and "since 2.0.0 is later than until 1.0.0" in page.error


# --- bad input: command line and matrix ---------------------------------------------------------------


@pytest.mark.parametrize("options, words", [
    ((2, 0, 4096), "--nnodes must be at least 1"), ((0, 1, 4096), "--nproc must be at least 1"),
    ((-1, 1, 4096), "--nproc must be at least 1"), ((1, 1, 4096), "needs at least 2"),
    ((2, 1, -1), "--memory-limit-mb must be a positive"), ((2, 1, 0), "--memory-limit-mb must be a positive"),
])  # fmt: skip
def test_n35_n36_bad_launch_options_are_usage_errors(options, words):
    from verify.conftest import option_problems

    assert any(words in problem for problem in option_problems(*options)), option_problems(*options)
    assert option_problems(2, 1, 4096) == [] and option_problems(1, 2, 4096) == []  # 2 nodes of 1 process: 2 in all


def test_n36_a_bad_option_stops_pytest_before_anything_runs_or_is_overwritten(tmp_path):
    env = {**os.environ, "VERIFY_EVIDENCE_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-m", "pytest", "verify", "--nproc", "0", "-q", "-p", "no:cacheprovider",
                             "-k", "rank-crash-and-restarts"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert result.returncode == 4 and "--nproc must be at least 1" in result.stderr, result.stdout + result.stderr
    assert not list(tmp_path.iterdir())


def test_n38_the_matrix_checks_its_k_pattern_before_installing_anything(monkeypatch, capsys):
    from verify import matrix

    monkeypatch.setattr(matrix, "release_dir", lambda release: pytest.fail("installed before checking -k"))
    with pytest.raises(SystemExit) as stopped:
        matrix.main(["1.8.1", "-k", "("])
    assert stopped.value.code == 2 and "is not a regular expression" in capsys.readouterr().err


# --- bad input: evidence and the matrix's folders -------------------------------------------------------


def test_n31_a_folder_not_named_after_a_release_is_skipped_with_a_warning(tmp_path):
    row = {"page": "p", "snippet": "passing_claim.py", "claim": "c", "outcome": "holds", "verdict": "shown"}
    for name in ("notaversion", "1.15.0.bak", "1.15.0"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "matrix.json").write_text(json.dumps({"release": name, "claims": [row]}))
    with pytest.warns(evidence.UnreadableEvidence, match="not a release number") as caught:
        assert list(evidence.across_releases(PROOF, tmp_path)) == ["1.15.0"]
    assert sorted(Path(str(w.message).split(":")[0]).name for w in caught) == ["1.15.0.bak", "notaversion"]


@pytest.mark.parametrize("record", [
    {"claims": [1, 2]}, {"claims": [{"id": "c"}]}, {"claims": [{"id": "c", "passed": True, "reports": "x"}]},
    {"claims": [], "mutants": 5}, {"claims": [{"id": "c", "passed": "yes"}]},
])  # fmt: skip
def test_n32_evidence_of_the_wrong_shape_is_unreadable_and_named(tmp_path, monkeypatch, record):
    from verify.website import evidence_box

    path = evidence.path_of("p", "passing_claim.py", tmp_path)
    path.parent.mkdir()
    path.write_text(json.dumps({"page": "p", "snippet": "passing_claim.py", **record}))
    with pytest.warns(evidence.UnreadableEvidence, match=str(path)):
        assert evidence.read(PROOF, tmp_path) is None
    monkeypatch.setattr(evidence, "EVIDENCE_DIR", tmp_path)
    monkeypatch.setattr(evidence, "REFERENCE_EVIDENCE_DIR", tmp_path / "none")
    with pytest.warns(evidence.UnreadableEvidence):
        assert "No evidence from this machine yet" in evidence_box.box(PROOF, "p")  # the site: no crash


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600)])
def test_n42_evidence_files_are_as_readable_as_the_umask_allows(tmp_path, umask, mode):
    before = os.umask(umask)
    try:
        path = evidence.write({"page": "p", "snippet": "passing_claim.py", "claims": []}, tmp_path)
    finally:
        os.umask(before)
    assert path.stat().st_mode & 0o777 == mode
