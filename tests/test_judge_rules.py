"""The judge's rules are one number in every fingerprint (judge.JUDGE_RULES_VERSION), not the text of
verify/judge.py: a reworded message or a renamed helper leaves all evidence current. This test keeps the
number honest: it judges a fixed set of hand-made runs, and the outcomes (pass or fail, judged by value,
each mutant's status and how each claim fell) must be the ones recorded for the declared version.

When it fails because the judge now decides differently: raise JUDGE_RULES_VERSION, add its line to
OUTCOMES_BY_VERSION (the digest the failure prints), and refresh reference-evidence/ (every proof's
evidence is then out of date: `python -m pytest verify --mutants && python -m verify.website.reference`)."""

import hashlib
import json
from types import SimpleNamespace

from verify import judge as judge_module
from verify.pages import Claim, Proof
from verify.runner import LaunchSettings, RankOutcome, SnippetRun

OUTCOMES_BY_VERSION = {
    1: "43944cd6eb7c8bfe3267ec104674267289261022ae48f49c4475fedc401b0c64",
}

CLAIMS = {"c": Claim(says="a claim", breaks_when=("value-bug", "control-bug"), through_control=("control-bug",))}
PROOF = Proof(page="p", snippet="ddp_gradients_match_full_batch.py", claims=CLAIMS)
CPU = LaunchSettings(num_processes=2, use_cpu=True)
TWO_NODES = LaunchSettings(num_processes=2, num_machines=2, use_cpu=True)
STATE = {"torch_world_size": 2, "accelerate_num_processes": 2, "backend": "gloo", "torch_rank": None}
HOLDS = {"claim": "c", "measured": 0.0, "control": 1.0, "op": "<=", "bound": 0.5}


def run(states=None, report=HOLDS, status="finished", reached=None, reports=None):
    states = states if states is not None else {0: STATE, 1: STATE}
    ranks = {}
    for rank, state in states.items():
        found = reports if reports is not None else [{**report, "rank": rank}]
        ranks[rank] = RankOutcome(rank=rank, state={**state, "torch_rank": rank} if state.get("torch_rank") is None
                                  else state, reports=found, finished=True, mutant_reached=reached)  # fmt: skip
    return SnippetRun("x", "x.py", status, ranks, problem=None if status == "finished" else "it stopped")


PLAIN_RUNS = {
    "holds": (run(), CPU),
    "measured misses": (run(report={**HOLDS, "measured": 0.9}), CPU),
    "control meets the bound": (run(report={**HOLDS, "control": 0.1}), CPU),
    "nan never holds": (run(report={**HOLDS, "measured": "nan"}), CPU),
    "between": (run(report={**HOLDS, "op": "in", "bound": [0, 1], "measured": 0.5, "control": 2}), CPU),
    "crashed": (run(status="crashed"), CPU),
    "hung": (run(status="hung"), CPU),
    "not run": (None, CPU),
    "one rank ran": (run(states={0: STATE}), CPU),
    "accelerate sees one process": (run(states={0: {**STATE, "accelerate_num_processes": 1},
                                                1: {**STATE, "accelerate_num_processes": 1}}), CPU),
    "wrong backend": (run(states={0: {**STATE, "backend": "nccl"}, 1: {**STATE, "backend": "nccl"}}), CPU),
    "ranks swapped": (run(states={0: {**STATE, "torch_rank": 1}, 1: {**STATE, "torch_rank": 0}}), CPU),
    "no report": (run(reports=[]), CPU),
    "an undeclared claim": (run(reports=[{**HOLDS, "claim": "other", "rank": 0}, {**HOLDS, "rank": 0}]), CPU),
    "two nodes without a node rank": (run(), TWO_NODES),
    "two nodes": (run(states={0: {**STATE, "env_rank": 0, "env_local_rank": 0, "env_world_size": 2, "env_group_rank": 0},
                              1: {**STATE, "env_rank": 1, "env_local_rank": 0, "env_world_size": 2,
                                  "env_group_rank": 1}}), TWO_NODES),
}  # fmt: skip

MUTANT_RUNS = {
    "value moves": ("value-bug", run(report={**HOLDS, "measured": 0.9}, reached=True)),
    "still holds": ("value-bug", run(reached=True)),
    "only the control moved": ("value-bug", run(report={**HOLDS, "control": 0.1}, reached=True)),
    "the control moved, as declared": ("control-bug", run(report={**HOLDS, "control": 0.1}, reached=True)),
    "crashed": ("value-bug", run(status="crashed", reached=True)),
    "never reached": ("value-bug", run(reached=False)),
    "not reported": ("value-bug", run(reports=[], reached=True)),
    "not run": ("value-bug", None),
    "launch failed": ("value-bug", run(status="launch_failed")),
}


def outcomes() -> dict:
    found = {}
    for name, (snippet_run, settings) in PLAIN_RUNS.items():
        found[name] = [[v.claim, v.passed, v.by_value] for v in judge_module.judge(PROOF, snippet_run, settings)]
    for name, (mutant_name, snippet_run) in MUTANT_RUNS.items():
        mutant = SimpleNamespace(name=mutant_name, describes="a bug")
        verdict = judge_module.judge_mutant(PROOF, mutant, snippet_run, CPU)
        found["mutant: " + name] = [verdict.status, {claim: [c["killed"], c["how"]] for claim, c in verdict.claims.items()},
                                    verdict.caught("c")]  # fmt: skip
    return found


def test_the_judges_rules_version_names_its_behaviour():
    found = outcomes()
    assert found["holds"] == [["c", True, True]] and found["measured misses"] == [["c", False, True]]
    assert found["mutant: value moves"][0] == "killed" and found["mutant: only the control moved"][0] == "survived"
    digest = hashlib.sha256(json.dumps(found, sort_keys=True).encode()).hexdigest()
    version = judge_module.JUDGE_RULES_VERSION
    assert OUTCOMES_BY_VERSION.get(version) == digest, (
        f"the judge decides differently from JUDGE_RULES_VERSION = {version} (outcomes digest {digest}): raise the "
        "version, add it here with this digest, and refresh reference-evidence/ (see this file's docstring)"
    )
