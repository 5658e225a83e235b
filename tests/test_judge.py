"""The judge on hand-made runs: fast checks of each rule, no launch needed."""

from verify.judge import judge
from verify.pages import Proof
from verify.runner import LaunchSettings, RankOutcome, SnippetRun
from verify.session import skip_reason

PROOF = Proof(page="p", snippet="ddp_gradients_match_full_batch.py", claims={"c": "a claim"})
CPU = LaunchSettings(num_processes=2, use_cpu=True)
GOOD_STATE = {"torch_world_size": 2, "accelerate_num_processes": 2, "backend": "gloo"}


def run_with(states, report=None):
    report = report or {"claim": "c", "measured": 0.0, "control": 1.0, "op": "<=", "bound": 0.5}
    ranks = {r: RankOutcome(rank=r, state=s, reports=[{**report, "rank": r}], finished=True) for r, s in states.items()}
    return SnippetRun("x", "x.py", "finished", ranks)


def test_a_good_run_passes():
    assert judge(PROOF, run_with({0: GOOD_STATE, 1: GOOD_STATE}), CPU)[0].passed


def test_processes_that_each_believe_they_are_alone_fail():
    # `--multi_gpu` on CPU without ACCELERATE_USE_CPU: torch sees 2 ranks, Accelerate sees 1.
    alone = {**GOOD_STATE, "accelerate_num_processes": 1}
    verdict = judge(PROOF, run_with({0: alone, 1: alone}), CPU)[0]
    assert not verdict.passed and "rank 0: accelerate num_processes is 1, asked for 2" in verdict.reason


def test_the_wrong_backend_fails():
    nccl = {**GOOD_STATE, "backend": "nccl"}
    verdict = judge(PROOF, run_with({0: nccl, 1: nccl}), CPU)[0]
    assert not verdict.passed and "backend nccl, expected gloo" in verdict.reason


def test_a_nan_measurement_never_holds():
    nan = {"claim": "c", "measured": "nan", "control": 1.0, "op": "<=", "bound": 0.5}
    assert not judge(PROOF, run_with({0: GOOD_STATE, 1: GOOD_STATE}, nan), CPU)[0].passed


def test_gpu_proofs_are_skipped_with_a_reason_on_cpu_and_run_on_gpus():
    gpu_proof = Proof(page="p", snippet="s.py", claims={"c": "s"}, requires="cuda")
    assert "needs 2 CUDA GPUs" in skip_reason(gpu_proof, CPU)
    assert skip_reason(gpu_proof, LaunchSettings(num_processes=2, use_cpu=False)) is None
    assert LaunchSettings(num_processes=2, use_cpu=False).expected_backend == "nccl"
