"""Labs: notebooks under docs/labs/ that `pytest verify` executes top to bottom and judges like snippets.

A lab is a jupytext percent-format `.py` (the source of truth; no outputs committed). Its header's
`jupyter: proof:` block declares title, processes, timeout and claims, with the same schema as a
page's proof. The runner executes it in a fresh Jupyter kernel (nbclient, errors not allowed), reads
the claims its last cells reported through `_claims`, and turns them into the SnippetRun the judge
already understands. Each claim must carry `world=[...]`: what every worker of its launch saw (rank,
world_size, num_processes, backend), so the judge checks world size and backend as for a snippet.
The executed notebook is kept in `.verify/labs/<lab>.ipynb`; the site shows it instead of the bare source.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from verify import environment, evidence, reaper, schema
from verify import mutation
from verify.judge import MutantVerdict, Results, Verdict, judge, judge_mutant
from verify.paths import EXECUTED_LABS_DIR, LABS_DIR, ROOT, RUNS_DIR, SNIPPETS_DIR
from verify.pages import DEFAULT_TIMEOUT_S, Page, PageError, Proof, claim_from, validated
from verify.runner import LaunchSettings, RankOutcome, SnippetRun, kill_processes

EXECUTED_DIR = EXECUTED_LABS_DIR


@dataclass(frozen=True)
class LabProof(Proof):
    """A lab's declared claims; `snippet` is the lab's file name, found in the labs folder."""


def lab_settings(proof: Proof) -> LaunchSettings:
    # Labs set ACCELERATE_USE_CPU themselves: they run on gloo, whatever GPUs the machine has.
    return LaunchSettings(num_processes=proof.world_size(2), use_cpu=True)


def lab_header(path: Path) -> tuple[str | None, int]:
    """The YAML of the jupytext header ('# ---' to '# ---', comment marks removed) and its first line."""
    lines = path.read_text(encoding="utf-8-sig").splitlines()
    if not lines or lines[0].strip() != "# ---":
        return None, 1
    end = next((n for n in range(1, len(lines)) if lines[n].strip() == "# ---"), len(lines))
    return "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in lines[1:end]), 2


def read_lab(path: Path) -> LabProof:
    import jupytext

    try:
        declared = jupytext.read(path).metadata.get("proof")
    except Exception as error:  # noqa: BLE001  a lab that jupytext cannot read fails alone
        raise PageError(f"{path}: not a readable jupytext notebook: {error}") from None
    if not isinstance(declared, dict) or not isinstance(declared.get("claims"), dict) or not declared["claims"]:
        raise PageError(f"{path}: its header declares no `jupyter: proof: claims:`")
    header, first_line = lab_header(path)
    checked = validated(path, declared, schema.LabHeader, header, first_line, under=("jupyter", "proof"))
    return LabProof(
        page=path.stem,
        snippet=path.name,
        claims={claim_id: claim_from(claim) for claim_id, claim in checked.claims.items()},
        timeout=float(checked.timeout or DEFAULT_TIMEOUT_S),
        processes=checked.processes,
        snippets_dir=path.parent,
    )


def lab_paths(labs_dir: Path = LABS_DIR) -> list[Path]:
    return sorted(p for p in labs_dir.glob("*.py") if not p.name.startswith("_")) if labs_dir.exists() else []


def load_labs(labs_dir: Path = LABS_DIR) -> tuple[list[LabProof], list[Page]]:
    """Every lab's proof, and a Page carrying the error of each lab whose header cannot be used."""
    proofs, broken = [], []
    for path in lab_paths(labs_dir):
        try:
            proofs.append(read_lab(path))
        except PageError as error:
            broken.append(Page(slug=path.stem, path=path, meta={}, error=str(error)))
    return proofs, broken


def kernel_environment(report_file: str) -> dict:
    env = environment.scrubbed(os.environ)
    env["PROOF_REPORT_FILE"] = report_file
    env["PYTHONPATH"] = os.pathsep.join([str(SNIPPETS_DIR), str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def failing_cell(notebook) -> str | None:
    """'cell N (first line)' of the first code cell whose outputs hold an error."""
    for number, cell in enumerate(notebook.cells, start=1):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if output.get("output_type") == "error":
                first = next((line for line in cell.source.splitlines() if line.strip()), "")
                return f"cell {number} ({first.strip()[:80]!r}) raised {output.get('ename')}: {output.get('evalue')}"
    return None


CELL_OUTPUT_LIMIT = 100_000  # characters of one output kept in the executed notebook (the site shows it)


def cap_outputs(notebook, limit: int = CELL_OUTPUT_LIMIT) -> None:
    """Keep the first `limit` characters of each output's text, and say that the rest was cut."""
    for cell in notebook.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            texts = [("text", output)] if "text" in output else []
            texts += [(kind, output["data"]) for kind in ("text/plain", "text/html") if kind in output.get("data", {})]
            for key, holder in texts:
                text = holder[key] if isinstance(holder[key], str) else "".join(holder[key])
                if len(text) > limit:
                    holder[key] = text[:limit] + f"\n[output cut: {len(text) - limit} more characters were not kept]\n"


def cell_named(notebook, number: int | None) -> str:
    if number is None:
        return "no cell (the kernel was starting)"
    first = next((line for line in notebook.cells[number - 1].source.splitlines() if line.strip()), "")
    return f"cell {number} ({first.strip()[:80]!r})"


def kill_kernel_tree(client) -> None:
    """The kernel and whatever it forked (notebook_launcher's workers): nothing may outlive a lab."""
    try:
        pid = client.km.provisioner.pid
    except Exception:  # noqa: BLE001  no kernel, or already gone
        return
    kill_processes([pid])


def break_the_library(notebook, mutant: mutation.Mutant, reached_file: Path) -> None:
    """Apply `mutant` in the kernel before the lab's first cell, and record at the end whether its patched code
    ran. notebook_launcher forks its workers from the kernel, so they run in the broken library too, and
    the patch's shared flag sees them reach it. The kernel dies with the lab, taking the patch with it."""
    import nbformat

    notebook.cells.insert(0, nbformat.v4.new_code_cell(
        f"from verify import mutation as _mutation\n_mutant_patch = _mutation.apply({mutant.name!r}, {str(mutant.source)!r})"))  # fmt: skip
    notebook.cells.append(nbformat.v4.new_code_cell(
        f"import json as _json\nwith open({str(reached_file)!r}, 'w') as _file:\n"
        "    _json.dump({'reached': _mutant_patch.reached, 'targets': _mutant_patch.targets}, _file)"))  # fmt: skip


def run_lab(proof: LabProof, work_dir: Path, executed_dir: Path | None = EXECUTED_DIR,
            mutant: mutation.Mutant | None = None) -> SnippetRun:  # fmt: skip
    """Execute the lab in a fresh kernel and collect its claims; with `mutant`, in that broken library (its
    executed notebook is then never kept: the site shows the plain run)."""
    import jupytext
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    work_dir.mkdir(parents=True, exist_ok=True)
    report_file = str(work_dir / f"{proof.name}.rank{{rank}}.claims.jsonl")
    notebook = jupytext.read(proof.path)
    reached_file = work_dir / "mutant-reached.json"
    if mutant is not None:
        break_the_library(notebook, mutant, reached_file)
        executed_dir = None
    running = {"cell": None}  # the cell being executed: named when the lab hangs or its kernel dies
    # `timeout` is the lab's whole budget from its first cell on (as a snippet's runs from when its ranks
    # are ready): nbclient's own limit is per cell only.
    deadline = threading.Timer(proof.timeout, lambda: kill_kernel_tree(client))

    def cell_starts(cell, cell_index):
        running["cell"] = cell_index + 1
        if not deadline.is_alive() and not deadline.finished.is_set():
            deadline.start()

    client = NotebookClient(
        notebook, timeout=proof.timeout, kernel_name="python3", allow_errors=False,
        resources={"metadata": {"path": str(work_dir)}},  # the kernel's working directory
        on_cell_start=cell_starts,
    )  # fmt: skip
    started = time.monotonic()
    status, problem = "finished", None
    cell_seconds = []
    try:
        with reaper.tracked(lambda: kill_kernel_tree(client)):
            client.execute(env=kernel_environment(report_file))
    except CellTimeoutError:
        status = "hung"
        problem = f"lab {proof.snippet}: {cell_named(notebook, running['cell'])} ran past {proof.timeout:.0f} s"
    except CellExecutionError:
        status = "crashed"
        problem = f"lab {proof.snippet}: {failing_cell(notebook) or 'a cell raised'}"
    except (DeadKernelError, RuntimeError) as error:  # RuntimeError: it died before replying to kernel_info
        if deadline.finished.is_set() and not reaper.stopping.is_set():
            status = "hung"
            problem = (f"lab {proof.snippet}: did not finish within {proof.timeout:.0f} s; "
                       f"{cell_named(notebook, running['cell'])} was running and was stopped")  # fmt: skip
        else:
            status = "crashed"
            problem = f"lab {proof.snippet}: the kernel died in {cell_named(notebook, running['cell'])}: {error}"
    finally:
        deadline.cancel()
        kill_kernel_tree(client)
    if reaper.stopping.is_set():  # interrupted: what the lab did so far proves nothing, so write nothing
        raise KeyboardInterrupt(f"lab {proof.snippet} stopped; no evidence written")
    seconds = time.monotonic() - started
    for number, cell in enumerate(notebook.cells, start=1):  # nbclient records when each cell ran
        timing = cell.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" in timing and "shell.execute_reply" in timing:
            took = datetime.datetime.fromisoformat(timing["shell.execute_reply"].replace("Z", "+00:00")) - \
                datetime.datetime.fromisoformat(timing["iopub.execute_input"].replace("Z", "+00:00"))
            cell_seconds.append([number, round(took.total_seconds(), 2)])
    if executed_dir is not None:
        executed_dir.mkdir(parents=True, exist_ok=True)
        cap_outputs(notebook)
        notebook.metadata["verify"] = {"status": status, "problem": problem, "seconds": round(seconds, 2),
                                       "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
        nbformat.write(notebook, executed_dir / f"{proof.name}.ipynb")

    reports = []
    for claims_file in sorted(work_dir.glob(f"{proof.name}.rank*.claims.jsonl")):
        reports += [json.loads(line) for line in claims_file.read_text().splitlines() if line.strip()]
    shown = proof.path.relative_to(ROOT) if proof.path.is_relative_to(ROOT) else proof.path
    info = {"mode": "lab", "command": f"nbclient {shown}", "lab_seconds": round(seconds, 2),
            "cell_seconds": cell_seconds}
    if status != "finished":
        return SnippetRun(proof.name, str(proof.path), status, {}, problem, None, info)
    worlds = [report.get("details", {}).get("world") for report in reports]
    if not reports:
        problem = f"lab {proof.snippet}: every cell ran, but no cell reported a claim (through _claims)"
        return SnippetRun(proof.name, str(proof.path), "not reported", {}, problem, None, info)
    if any(not isinstance(world, list) or not world for world in worlds):
        problem = f"lab {proof.snippet}: every claim must report world=[what each worker saw]; got {worlds}"
        return SnippetRun(proof.name, str(proof.path), "crashed", {}, problem, None, info)
    ranks = {}
    for entry in worlds[0]:  # the kernel judged; the workers' world is the state the judge checks
        rank = int(entry.get("rank", -1))
        state = {
            "torch_world_size": entry.get("world_size"),
            "accelerate_num_processes": entry.get("num_processes"),
            "backend": entry.get("backend"),
            "distributed_type": entry.get("distributed_type"),
            "device": entry.get("device"),
        }
        ranks[rank] = RankOutcome(rank=rank, state=state, reports=[], finished=True, seconds=seconds)
    for report in reports:  # the claims were reported once, by the notebook's kernel (rank 0's view)
        report["torch_rank"], report["rank"] = report.get("rank"), 0
    if 0 in ranks:
        ranks[0].reports = reports
        if mutant is not None and reached_file.exists():  # the kernel's view: the flag is shared with the forks
            reached = json.loads(reached_file.read_text())
            ranks[0].mutant_reached, ranks[0].mutant_targets = bool(reached["reached"]), list(reached["targets"])
    return SnippetRun(proof.name, str(proof.path), "finished", ranks, None, seconds, info)


def run_lab_retrying_a_stuck_kernel(proof: LabProof, work_dir: Path, executed_dir: Path | None = EXECUTED_DIR,
                                     mutant: mutation.Mutant | None = None) -> SnippetRun:  # fmt: skip
    """run_lab, and once more in a fresh kernel when the first kernel hung or died (not when a cell raised).

    notebook_launcher forks its workers from a kernel that has threads of its own; rarely (twice among this
    machine's full runs on 2026-12-01) a launch never returned and the lab ran into its deadline. A second,
    fresh kernel tells such a one-off from a lab or a mutant that really hangs: that one hangs again and is
    reported as before. The run's launch record (`first_try`) keeps what the first kernel met."""
    run = run_lab(proof, work_dir, executed_dir, mutant)
    stuck = run.status == "hung" or (run.status == "crashed" and "the kernel died" in (run.problem or ""))
    if not stuck or reaper.stopping.is_set():
        return run
    first_problem = run.problem
    run = run_lab(proof, work_dir.with_name(work_dir.name + "@retry"), executed_dir, mutant)
    run.launch["first_try"] = first_problem
    return run


def verify_labs(
    proofs: list[LabProof], work_dir: Path, evidence_dir: Path | None = evidence.EVIDENCE_DIR,
    executed_dir: Path | None = EXECUTED_DIR, reuse_evidence: bool = False, mutants: bool = False,
) -> Results:  # fmt: skip
    """Each lab's claims judged, with evidence written as for a snippet; with `mutants`, each lab runs once
    more per mutant its claims name, in a fresh kernel with the library broken (`break_the_library`)."""
    results = Results()
    for proof in proofs:
        settings = lab_settings(proof)
        reusable = reuse_evidence and evidence_dir is not None
        reused = evidence.reused_verdicts(proof, settings, evidence_dir) if reusable else None
        reused_mutants = evidence.reused_mutant_verdicts(proof, mutation.named_mutants(proof), evidence_dir) \
            if reusable and mutants else {}
        if reused is not None and reused_mutants is not None:
            results.verdicts.update({(proof.page, proof.snippet, verdict.claim): verdict for verdict in reused})
            results.mutants.update({(proof.page, proof.snippet, v.mutant): v for v in reused_mutants.values()})
            continue
        run = run_lab_retrying_a_stuck_kernel(proof, work_dir / proof.name, executed_dir)
        proof_verdicts = judge(proof, run, settings)
        mutant_verdicts = []
        if mutants:
            known = mutation.catalogue_for(proof)
            for name in mutation.named_mutants(proof):
                if reaper.stopping.is_set():
                    break
                if name not in known:
                    mutant_verdicts.append(MutantVerdict(proof.page, proof.snippet, name, "", "not_run",
                                                         f"lab {proof.snippet}: no snippets/*/_mutants.py defines "
                                                         f"a mutant named {name!r}" + "".join(
                                                             f"; {problem}" for problem in
                                                             mutation.catalogue_problems(proof)), [], {}))  # fmt: skip
                    continue
                mutant_run = run_lab_retrying_a_stuck_kernel(proof, work_dir / f"{proof.name}@{name}", None, known[name])
                mutant_verdicts.append(judge_mutant(proof, known[name], mutant_run, settings))
        if evidence_dir is not None and not reaper.stopping.is_set():
            record = evidence.record(proof, run, proof_verdicts, settings, mutant_verdicts if mutants else None,
                                     evidence_dir)  # fmt: skip
            evidence.write(record, evidence_dir)
        results.verdicts.update({(proof.page, proof.snippet, verdict.claim): verdict for verdict in proof_verdicts})
        results.mutants.update({(proof.page, proof.snippet, verdict.mutant): verdict for verdict in mutant_verdicts})
    return results


if __name__ == "__main__":  # python -m verify.labs docs/labs/lab1_first_distributed_run.py
    for argument in sys.argv[1:]:
        lab = read_lab(Path(argument).resolve())
        for verdict in verify_labs([lab], RUNS_DIR / "labs-by-hand").verdicts.values():
            print("PASS" if verdict.passed else "FAIL", verdict.reason)
