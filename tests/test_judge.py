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


def test_a_process_whose_torch_rank_is_not_its_launcher_rank_fails():
    swapped = {0: {**GOOD_STATE, "torch_rank": 1}, 1: {**GOOD_STATE, "torch_rank": 0}}
    verdict = judge(PROOF, run_with(swapped), CPU)[0]
    assert not verdict.passed and "rank 0: torch.distributed rank is 1, expected 0" in verdict.reason


def test_across_two_nodes_every_rank_must_show_its_node_and_local_rank():
    two_nodes = LaunchSettings(num_processes=4, num_machines=2, use_cpu=True)
    states = {
        rank: {**GOOD_STATE, "torch_world_size": 4, "accelerate_num_processes": 4, "torch_rank": rank,
               "env_rank": rank, "env_local_rank": rank % 2, "env_world_size": 4, "env_group_rank": rank // 2}
        for rank in range(4)
    }  # fmt: skip
    assert judge(PROOF, run_with(states), two_nodes)[0].passed
    states[3] = {**states[3], "env_group_rank": 0}  # rank 3 claims to sit on node 0
    verdict = judge(PROOF, run_with(states), two_nodes)[0]
    assert not verdict.passed and "rank 3: node (GROUP_RANK) is 0, expected 1" in verdict.reason


def test_node_counts_proofs_declare_are_kept_under_nnodes():
    from verify.session import settings_for

    two_nodes = LaunchSettings(num_processes=4, num_machines=2, use_cpu=True)
    plain = Proof(page="p", snippet="s.py", claims={"c": "s"})
    two_ranks = Proof(page="p", snippet="s.py", claims={"c": "s"}, processes=2)
    one_node = Proof(page="p", snippet="s.py", claims={"c": "s"}, nodes=1)
    shape = lambda proof: (settings_for(proof, two_nodes).num_processes, settings_for(proof, two_nodes).num_machines)  # noqa: E731
    assert shape(plain) == (4, 2)
    assert shape(two_ranks) == (2, 2)  # one rank on each node
    assert shape(one_node) == (2, 1)


def mutant_run(measured, control):
    """A run under a mutant in which both ranks reached it and reported these values (bound: <= 0.5)."""
    run = run_with({0: GOOD_STATE, 1: GOOD_STATE}, {"claim": "c", "measured": measured, "control": control,
                                                     "op": "<=", "bound": 0.5})  # fmt: skip
    for outcome in run.ranks.values():
        outcome.mutant_reached = True
    return run


def judged(claim, run):
    from pathlib import Path

    from verify.judge import judge_mutant
    from verify.mutation import Mutant

    proof = Proof(page="p", snippet="ddp_gradients_match_full_batch.py", claims={"c": claim})
    return judge_mutant(proof, Mutant("m", "a bug", lambda patch: None, Path("x")), run, CPU)


def test_a_mutant_of_breaks_when_must_move_the_measured_value_not_only_the_control():
    from verify.pages import Claim

    only_control = mutant_run(measured=0.0, control=0.0)  # the control now meets the bound; measured unchanged
    found = judged(Claim(says="s", breaks_when=("m",)), only_control)
    assert found.status == "survived" and "breaks_control_when" in found.reason
    assert found.claims["c"]["how"] == "the measured value still held; only the control met the bound"
    moved = judged(Claim(says="s", breaks_when=("m",)), mutant_run(measured=1.0, control=1.0))
    assert moved.status == "killed" and moved.claims["c"]["how"] == "measured missed the bound"


def test_a_mutant_of_breaks_control_when_may_fail_the_claim_through_its_control():
    from verify.pages import Claim

    claim = Claim(says="s", breaks_when=("m",), through_control=("m",))  # as claim_from builds it
    found = judged(claim, mutant_run(measured=0.0, control=0.0))
    assert found.status == "killed" and found.claims["c"]["how"] == "the control met the bound"
    assert judged(claim, mutant_run(measured=0.0, control=1.0)).status == "survived"  # nothing failed at all
