"""Turns what the ranks reported into one verdict per declared claim, with a reason a person can act on."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field

from verify.pages import Proof
from verify.paths import SNIPPETS_DIR
from verify.runner import LaunchSettings, SnippetRun


def _load_claims_module():
    # The snippets' own reporter holds the relations; the harness judges with the very same code.
    spec = importlib.util.spec_from_file_location("_claims_for_judging", SNIPPETS_DIR / "_claims.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_claims = _load_claims_module()

# The rules by which this module turns reports into verdicts, as a number in every proof's fingerprint
# (verify/fingerprint.py): a change to how a verdict is reached makes all evidence "out of date", a change
# to a message or a name does not. tests/test_judge_rules.py ties it to the judge's behaviour on a fixed
# set of runs: when that behaviour changes the test fails until this number goes up (and every
# reference evidence file is refreshed).
JUDGE_RULES_VERSION = 1


@dataclass
class Verdict:
    page: str
    snippet: str
    claim: str
    passed: bool
    reason: str
    reports: list  # every rank's record of this claim
    # Judged on measured values: the run finished and ranks reported it. A crash, a hang or a missing
    # report is no measurement, so it can never show that a claim does not hold (outside its releases).
    by_value: bool = False


def run_problems(proof: Proof, run: SnippetRun | None, settings: LaunchSettings) -> list[str]:
    """What is wrong with the snippet's run as a whole; each problem fails every claim of the snippet."""
    if not proof.path.exists():
        return [f"the page names a snippet that does not exist: {proof.path}"]
    if run is None:
        return ["the snippet was not run"]
    if run.status != "finished":
        return [f"{run.status}: {run.problem}"]
    problems = []
    asked = settings.num_processes
    ranks = sorted(run.ranks)
    if ranks != list(range(asked)):
        problems.append(f"asked for {asked} processes, ranks {ranks} ran ({len(ranks)} process(es))")
    for rank, outcome in sorted(run.ranks.items()):
        state = outcome.state or {}
        seen = {
            "torch.distributed world size": state.get("torch_world_size"),
            "accelerate num_processes": state.get("accelerate_num_processes", asked),
        }
        for what, value in seen.items():
            if value != asked:
                problems.append(f"rank {rank}: {what} is {value}, asked for {asked}")
        identity = {  # the launcher's rank numbering: node-major, LOCAL_RANK within each node
            "torch.distributed rank": (state.get("torch_rank"), rank),
            "RANK": (state.get("env_rank"), rank),
            "LOCAL_RANK": (state.get("env_local_rank"), rank % settings.processes_per_machine),
            "WORLD_SIZE": (state.get("env_world_size"), asked),
        }
        if settings.num_machines > 1:
            identity["node (GROUP_RANK)"] = (state.get("env_group_rank"), rank // settings.processes_per_machine)
        for what, (value, expected) in identity.items():
            # Unknown values pass on one machine (hand-made runs); across machines each must be seen.
            if (value is not None or settings.num_machines > 1) and value != expected:
                problems.append(f"rank {rank}: {what} is {value}, expected {expected}")
        if state.get("backend") != settings.expected_backend:
            problems.append(f"rank {rank}: backend {state.get('backend')}, expected {settings.expected_backend}")
    declared = set(proof.claims)
    for rank, outcome in sorted(run.ranks.items()):
        undeclared = sorted({r["claim"] for r in outcome.reports} - declared)
        if undeclared:
            problems.append(f"rank {rank} reported claim(s) the page does not declare: {undeclared}")
    return problems


def not_measured(record: dict) -> str | None:
    """'the control measured nothing (None)' and the like: a record without both measurements of the
    bound's kind, which no comparison may turn into a verdict either way."""
    problems = [f"the {what} {why}" for what, key in (("measurement", "measured"), ("control", "control"))
                if (why := _claims.not_measured(record[key], record["op"], record["bound"]))]  # fmt: skip
    return "; ".join(problems) or None


def judge(proof: Proof, run: SnippetRun | None, settings: LaunchSettings) -> list[Verdict]:
    problems = run_problems(proof, run, settings)
    verdicts = []
    for claim in proof.claims:
        where = f"page {proof.page}, snippet {proof.snippet}, claim {claim}"
        reports = [r for o in (run.ranks.values() if run else []) for r in o.reports if r["claim"] == claim]
        if problems:
            verdicts.append(Verdict(proof.page, proof.snippet, claim, False, f"{where}: " + "\n".join(problems), reports))
            continue
        if not reports:
            verdicts.append(Verdict(proof.page, proof.snippet, claim, False, f"{where}: no rank reported it", reports))
            continue
        failures = []
        for record in sorted(reports, key=lambda r: r["rank"]):
            passed, holds, control_holds = _claims.verdict(record)
            relation = f"{record['op']} {record['bound']}"
            unmeasured = not_measured(record)
            if unmeasured:  # a verdict needs two measurements of the bound's kind, from the same run
                failures.append(f"rank {record['rank']}: not measured: {unmeasured}")
                continue
            if not holds:
                failures.append(f"rank {record['rank']}: measured {record['measured']}, expected {relation}")
            if control_holds:
                failures.append(
                    f"rank {record['rank']}: the negative control {record['control']} also meets {relation}, "
                    "so the check cannot fail"
                )
        reason = f"{where}: " + ("; ".join(failures) if failures else "holds on every reporting rank")
        verdicts.append(Verdict(proof.page, proof.snippet, claim, not failures, reason, reports, by_value=True))
    return verdicts


@dataclass
class MutantVerdict:
    """What one mutant did to the claims that name it: each must fail by its value, not by a crash."""

    page: str
    snippet: str
    mutant: str
    describes: str
    status: str  # killed | survived | crashed | not_reached | not_reported | not_run
    reason: str
    reached_ranks: list
    claims: dict  # claim id -> {"killed": bool, "how": str, "reports": [...]}

    def caught(self, claim: str) -> bool:
        return self.status in ("killed", "survived") and self.claims.get(claim, {}).get("killed", False)


@dataclass
class Results:
    verdicts: dict = field(default_factory=dict)  # (page slug, snippet, claim id) -> Verdict
    mutants: dict = field(default_factory=dict)  # (page slug, snippet, mutant) -> MutantVerdict


ONLY_THE_CONTROL_MOVED = "the measured value still held; only the control met the bound"
CONTROL_MEASURED_NOTHING = "the measured value still held; the control measured nothing under the mutant"


def judge_mutant(proof: Proof, mutant, run: SnippetRun | None, settings: LaunchSettings) -> MutantVerdict:
    """The claims of `proof` that name `mutant`, judged on the run made with it applied."""
    named = [claim_id for claim_id, claim in proof.claims.items() if mutant.name in claim.breaks_when]
    where = f"page {proof.page}, snippet {proof.snippet}, mutant {mutant.name} ({mutant.describes})"

    def verdict(status, reason, reached=(), claims=None):
        return MutantVerdict(proof.page, proof.snippet, mutant.name, mutant.describes, status, f"{where}: {reason}",
                             list(reached), claims or {})  # fmt: skip

    if run is None or run.status == "launch_failed":
        return verdict("not_run", (run.problem if run else None) or "the snippet was not run under this mutant")
    if run.status != "finished":
        return verdict("crashed", f"{run.status}, not caught by a value: {run.problem}")
    problems = run_problems(proof, run, settings)
    if problems:
        return verdict("not_run", "the run under the mutant is not valid: " + "; ".join(problems))
    reached = sorted(rank for rank, outcome in run.ranks.items() if outcome.mutant_reached)
    if not reached:
        targets = sorted({t for outcome in run.ranks.values() for t in outcome.mutant_targets}) or ["its patch"]
        return verdict("not_reached", f"the snippet never reaches {', '.join(targets)}: the mutant never ran")
    claims, survivors, missing = {}, [], []
    for claim in named:
        reports = sorted((r for o in run.ranks.values() for r in o.reports if r["claim"] == claim), key=lambda r: r["rank"])
        if not reports:
            missing.append(claim)
            claims[claim] = {"killed": False, "how": "not reported under the mutant", "reports": []}
            continue
        outcomes = [_claims.verdict(record) for record in reports]
        failed = not all(passed for passed, _, _ in outcomes)
        measured_missed = any(not holds for _, holds, _ in outcomes)
        # A mutant of breaks_when must move the measured value itself; only one of breaks_control_when
        # (a wrong answer about the world without the mechanism) may fail the claim through its control.
        control_met = any(control_holds for _, _, control_holds in outcomes)
        killed = measured_missed or (control_met and mutant.name in proof.claims[claim].through_control)
        if not failed:
            how = "still held"
        elif measured_missed:
            how = "measured missed the bound"
        elif killed:
            how = "the control met the bound"
        elif not control_met:  # the control measured nothing under the mutant: no catch either way
            how = CONTROL_MEASURED_NOTHING
        else:
            how = ONLY_THE_CONTROL_MOVED
        claims[claim] = {
            "killed": killed,
            "how": how,
            "reports": [{k: r.get(k) for k in ("rank", "measured", "control", "op", "bound", "details")} for r in reports],
        }
        if not killed:
            survivors.append(claim)
    if missing:
        return verdict("not_reported", f"no rank reported {missing} under the mutant", reached, claims)
    if survivors:
        values = "; ".join(
            f"{claim}: measured {claims[claim]['reports'][0]['measured']} still meets "
            f"{claims[claim]['reports'][0]['op']} {claims[claim]['reports'][0]['bound']}"
            + (" (only the control met the bound: name the mutant under breaks_control_when if the wrong answer "
               "is about the world without the mechanism, or make the measurement see it)"
               if claims[claim]["how"] == ONLY_THE_CONTROL_MOVED else "")
            for claim in survivors
        )
        return verdict("survived", f"the claim(s) still held in the mutant's world: {values}", reached, claims)
    return verdict("killed", "every claim naming it failed by its value", reached, claims)
