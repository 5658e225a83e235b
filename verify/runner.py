"""Launches snippets under `accelerate launch` and watches them: time limits, crashes, leftovers.

Grouped mode puts many snippets into one launch (verify/worker.py runs them in turn inside the same
ranks); isolated mode gives each snippet a launch of its own. Both go through the same code, so the
verdicts cannot depend on the mode except through the snippets themselves.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from verify import checkout, environment, reaper
from verify.bounded_output import BoundedOutput
from verify.paths import DOCS_DIR, ROOT, SNIPPETS_DIR
from verify.reaper import kill_groups

WORKER = Path(__file__).resolve().parent / "worker.py"
WITH_PARENT = Path(__file__).resolve().parent / "with_parent.py"  # the launcher dies with the harness
STARTUP_TIMEOUT_S = 180.0
POLL_S = 0.1
STACK_DUMP_WAIT_S = 1.5
MEMORY_POLL_S = 0.25
# Per rank, its forks included. A runaway snippet stops here instead of taking the machine with it;
# `pytest verify --memory-limit-mb` changes it.
MEMORY_LIMIT_MB = 4096


def cuda_device_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        return 0


@dataclass
class LaunchSettings:
    num_processes: int = 2  # the world size, over all machines
    num_machines: int = 1  # >1: one `accelerate launch` per machine rank, meeting on 127.0.0.1
    config_file: str | None = None
    extra_args: tuple = ()  # raw `accelerate launch` arguments, e.g. ("--cpu",) to show what that starts
    use_cpu: bool | None = None  # None: CPU unless there is one GPU per process
    startup_timeout: float = STARTUP_TIMEOUT_S
    memory_limit_mb: int | None = MEMORY_LIMIT_MB  # per rank; None: no limit

    def __post_init__(self):
        if self.use_cpu is None:
            self.use_cpu = cuda_device_count() < self.processes_per_machine

    @property
    def expected_backend(self) -> str:
        return "gloo" if self.use_cpu else "nccl"

    @property
    def processes_per_machine(self) -> int:
        return self.num_processes // self.num_machines

    def launch_args(self, port: int, machine_rank: int = 0) -> list[str]:
        args = []
        if self.config_file:
            args += ["--config_file", self.config_file]
        elif not self.extra_args:
            # --multi_gpu even on CPU: `--cpu --num_processes 2` starts ONE process (MULTI_CPU needs mpirun).
            args += ["--multi_gpu", "--num_machines", str(self.num_machines), "--mixed_precision", "no",
                     "--dynamo_backend", "no"]  # fmt: skip
        if self.num_machines > 1:  # what each node of a real cluster runs, its own machine rank each
            args += ["--machine_rank", str(machine_rank), "--main_process_ip", "127.0.0.1"]
        args += ["--num_processes", str(self.num_processes), "--main_process_port", str(port)]
        return args + list(self.extra_args)

    def environment(self) -> dict:
        env = environment.scrubbed(os.environ)  # no inherited rank identity nor Accelerate defaults
        if self.use_cpu:
            env["ACCELERATE_USE_CPU"] = "true"  # what makes `--multi_gpu` ranks use gloo on the CPU
        env.setdefault("OMP_NUM_THREADS", "1")  # 2 ranks on 2 cores: more threads only fight each other
        env["PYTHONUNBUFFERED"] = "1"
        return env


@dataclass
class RankOutcome:
    rank: int
    state: dict | None = None
    reports: list = field(default_factory=list)
    traceback: str | None = None
    log: str = ""
    seconds: float | None = None
    finished: bool = False
    ended_at: float | None = None  # wall-clock time of its end event: who failed first
    mutant_reached: bool | None = None  # under a mutant: whether its patched code ran in this rank
    mutant_targets: list = field(default_factory=list)  # what the mutant patched


@dataclass
class SnippetRun:
    name: str
    path: str
    status: str  # finished | crashed | hung | launch_failed
    ranks: dict = field(default_factory=dict)  # rank -> RankOutcome
    problem: str | None = None
    seconds: float | None = None  # the snippet's own time, slowest rank
    launch: dict = field(default_factory=dict)


@dataclass
class SnippetSpec:
    name: str  # unique in a launch: the snippet's stem, with "@mutant" for a run under a mutant
    path: str
    timeout: float
    mutant: dict | None = None  # {"name", "source"}: the library bug applied in every rank for this run


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def read_events(run_dir: Path) -> dict[int, list]:
    events: dict[int, list] = {}
    for status_file in run_dir.glob("rank*.status.jsonl"):
        rank = int(status_file.name[len("rank") :].split(".")[0])
        events[rank] = []
        for line in status_file.read_text().splitlines():
            try:
                events[rank].append(json.loads(line))
            except json.JSONDecodeError:
                break  # the rank is still writing this line; the next poll reads it whole
    return events


def rank_pids(events: dict) -> list[int]:
    """Each rank's pid, from its first status line."""
    return [rank_events[0]["pid"] for rank_events in events.values() if rank_events]


def read_text(path: Path, limit: int = 20000) -> str:
    """The last `limit` characters of a file, read from its end (a log may be large)."""
    try:
        with open(path, "rb") as file:
            size = file.seek(0, os.SEEK_END)
            file.seek(max(0, size - 4 * limit))  # UTF-8: at most 4 bytes a character
            text = file.read().decode(errors="replace")
    except FileNotFoundError:
        return ""
    return text if len(text) <= limit and size <= 4 * limit else "...\n" + text[-limit:]


class Launchers:
    """The `accelerate launch` processes of one run, one per machine, watched as one."""

    def __init__(self, processes: list[subprocess.Popen]):
        self.processes = processes
        # Every process and group ever seen under a launcher: if the launcher dies, its ranks re-parent
        # and no longer show as its children, but they must die with the launch.
        self.seen: dict[int, psutil.Process] = {}
        self.groups: dict[int, psutil.Process] = {}  # group id -> its leader, as first seen

    def watch(self) -> None:
        for pid in self.processes_alive():  # not yet reaped, so the pid is still this launcher's
            with contextlib.suppress(psutil.NoSuchProcess):
                launcher = psutil.Process(pid)
                self.groups.setdefault(pid, launcher)  # each launcher leads its own session
                for child in launcher.children(recursive=True):
                    self.seen.setdefault(child.pid, child)
                    with contextlib.suppress(ProcessLookupError):
                        if os.getpgid(child.pid) == child.pid:  # a rank: torch starts each in its own session
                            self.groups.setdefault(child.pid, child)

    def poll(self):
        """None while every launcher runs; else the first exit code seen (a failed machine ends the run)."""
        codes = [process.poll() for process in self.processes]
        ended = [code for code in codes if code is not None]
        if not ended or (len(ended) < len(codes) and all(code == 0 for code in ended)):
            return None  # a machine that finished cleanly waits for the others
        return next((code for code in ended if code != 0), 0)

    @property
    def returncode(self):
        return self.poll()

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def processes_alive(self) -> list[int]:
        return [process.pid for process in self.processes if process.poll() is None]

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        for process in self.processes:
            process.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))


def kill_processes(roots=(), extra_pids=()) -> None:
    """SIGKILL each pid with every process under it and every process group they lead; wait until gone."""
    kill_groups([*roots, *extra_pids])


def kill_tree(process: Launchers, extra_pids=()) -> None:
    """SIGKILL the launchers and every process under them, ranks included (they run in sessions of their
    own), and every rank ever seen, whether or not its launcher is still there to be its parent."""
    process.watch()
    kill_groups([*process.processes_alive(), *process.seen.values(), *extra_pids], process.groups)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def forked_memory(child: psutil.Process) -> int:
    """What a rank's child adds: its own pages (USS). A fork shares the rank's pages until it writes them, so
    its RSS would count the rank a second time (a 2 GiB rank forking one child read as 4 GiB)."""
    try:
        return child.memory_full_info().uss
    except psutil.AccessDenied:
        return child.memory_info().rss
    except psutil.NoSuchProcess:  # gone, or a zombie (a mutant's fork that exited, not yet reaped)
        return 0


class MemoryWatch:
    """Each rank's resident memory (its forks' own pages included), sampled while a snippet runs, against a limit."""

    def __init__(self, limit_mb: int | None):
        self.limit_mb, self.peak_mb, self.next_look = limit_mb, 0.0, 0.0

    def take_peak(self) -> int:
        peak, self.peak_mb = self.peak_mb, 0.0
        return round(peak)

    def over_limit(self, events: dict) -> str | None:
        """What to report when a rank holds more than the limit, else None."""
        if time.monotonic() < self.next_look:
            return None
        self.next_look = time.monotonic() + MEMORY_POLL_S
        for rank, rank_events in sorted(events.items()):
            if not rank_events:
                continue
            try:
                process = psutil.Process(rank_events[0]["pid"])
                used = (process.memory_info().rss + sum(forked_memory(child) for child in process.children(recursive=True))) / 2**20
            except psutil.Error:
                continue
            self.peak_mb = max(self.peak_mb, used)
            if self.limit_mb is not None and used > self.limit_mb:
                return (f"rank {rank} ran out of memory (limit {self.limit_mb} MiB per rank): it held {used:.0f} MiB "
                        "when it was stopped; all its processes were killed")  # fmt: skip
        return None


class Launch:
    """One `accelerate launch` of the worker over a batch of snippets."""

    def __init__(self, batch: list[SnippetSpec], settings: LaunchSettings, run_dir: Path, mode: str):
        self.batch, self.settings, self.run_dir, self.mode = batch, settings, run_dir, mode
        run_dir.mkdir(parents=True, exist_ok=True)
        manifest = {"run_dir": str(run_dir), "snippets": [{"name": s.name, "path": s.path, "mutant": s.mutant} for s in batch]}
        (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=1))
        port = free_port()
        self.commands = [
            [sys.executable, "-m", "accelerate.commands.launch",
             *settings.launch_args(port, machine), str(WORKER), str(run_dir / "manifest.json")]
            for machine in range(settings.num_machines)
        ]  # fmt: skip
        self.log_path = run_dir / "launch.log"  # every machine's launcher writes here, line by line
        self.token = uuid.uuid4().hex  # in every process of this launch's environment: finds the strays
        # A snippet must not write into the pages or the snippets; its own folder may be a test's.
        self.watched = [DOCS_DIR, SNIPPETS_DIR, *sorted({str(Path(spec.path).parent) for spec in batch})]

    def info(self, **more) -> dict:
        command = "\n".join(" ".join(command) for command in self.commands)
        return {"mode": self.mode, "command": command, "batch_size": len(self.batch), **more}

    def outcome(self, spec: SnippetSpec, events: dict) -> dict[int, RankOutcome]:
        ranks = {}
        for rank, rank_events in events.items():
            outcome = RankOutcome(rank=rank)
            for event in rank_events:
                if event.get("snippet") == spec.name and event["event"] == "end":
                    outcome.finished, outcome.seconds = event["ok"], event["seconds"]
                    outcome.ended_at = event["time"]
                    outcome.state = event.get("state")
                    outcome.mutant_reached = event.get("mutant_reached")
                    outcome.mutant_targets = event.get("mutant_targets") or []
            claims_file = self.run_dir / f"{spec.name}.rank{rank}.claims.jsonl"
            if claims_file.exists():
                outcome.reports = [json.loads(line) for line in claims_file.read_text().splitlines() if line]
                for report in outcome.reports:  # the file is this process's own; keep what torch said too
                    report["torch_rank"], report["rank"] = report.get("rank"), rank
            outcome.traceback = read_text(self.run_dir / f"{spec.name}.rank{rank}.traceback") or None
            outcome.log = read_text(self.run_dir / f"{spec.name}.rank{rank}.log", limit=4000)
            ranks[rank] = outcome
        return ranks

    def run(self) -> tuple[dict[str, SnippetRun], list[SnippetSpec]]:
        """Runs until the batch is done or one snippet fails; returns the verdicts and the snippets not yet run."""
        with reaper.stop_on_signals():
            return self._run()

    def _run(self) -> tuple[dict[str, SnippetRun], list[SnippetSpec]]:
        results: dict[str, SnippetRun] = {}
        launched = time.monotonic()
        scratch = self.run_dir / "scratch"  # the ranks' working directory: a snippet's stray files land here
        scratch.mkdir(exist_ok=True)
        process = Launchers([])
        self.output = BoundedOutput(self.log_path)
        environment = {**self.settings.environment(), reaper.RUN_TOKEN: self.token}
        checkout_before = checkout.snapshot(self.watched, ignore=[self.run_dir.parent])
        with reaper.tracked(lambda: kill_tree(process, self.rank_pids())):
            try:
                for command in self.commands:
                    process.processes.append(subprocess.Popen(
                        [sys.executable, str(WITH_PARENT), str(os.getpid()), *command],
                        stdout=self.output.write_fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                        env=environment, start_new_session=True, cwd=scratch,
                    ))  # fmt: skip
                    process.watch()  # its group is known from the start, whatever happens next
                self.output.started()
                return self.watch(process, results, launched)
            finally:  # every way out: done, failed, interrupted, SIGTERM
                kill_tree(process, self.rank_pids())
                self.end_strays(results)
                self.output.settle()
                self.fail_if_checkout_changed(results, checkout_before)

    def end_strays(self, results: dict) -> None:
        """Kill every process of this launch still alive after it, however detached, and fail the snippet
        that left it (each process names it: VERIFY_SNIPPET; one that cannot fails every snippet run)."""
        strays = reaper.tagged(self.token)
        if not strays:
            return
        by_snippet: dict[str, list[str]] = {}
        for process, env in strays:
            try:
                what = f"pid {process.pid}: {' '.join(process.cmdline())[:120]}"
            except psutil.Error:
                what = f"pid {process.pid}"
            by_snippet.setdefault(env.get("VERIFY_SNIPPET") or "", []).append(what)
        kill_groups([process for process, _ in strays])
        for snippet, found in by_snippet.items():
            names = [snippet] if snippet in results else list(results)
            message = (f"snippet {snippet or 'of this launch'} left {len(found)} process(es) running after the "
                       f"launch ended; they were killed: " + "; ".join(found))  # fmt: skip
            warnings.warn(message, stacklevel=1)
            for name in names:
                self.fail_run(results[name], message)

    def fail_if_checkout_changed(self, results: dict, before: dict) -> None:
        changed = checkout.changes(before, checkout.snapshot(self.watched, ignore=[self.run_dir.parent]))
        if changed:
            shown = [str(Path(line).relative_to(ROOT)) if line.startswith(str(ROOT)) else line for line in changed]
            message = ("the checkout changed while this launch ran (a snippet wrote outside its scratch folder): "
                       + ", ".join(shown[:20]) + (f" and {len(shown) - 20} more" if len(shown) > 20 else ""))  # fmt: skip
            for run in results.values():
                self.fail_run(run, message)

    @staticmethod
    def fail_run(run: "SnippetRun", message: str) -> None:
        if run.status == "finished":
            run.status, run.problem = "crashed", message
        elif message not in (run.problem or ""):
            run.problem = f"{run.problem}\n{message}"

    def rank_pids(self) -> list:
        """The ranks that wrote a status file and still run this launch (a pid reused since is left alone)."""
        alive = []
        for pid in rank_pids(read_events(self.run_dir)):
            with contextlib.suppress(psutil.Error):
                rank = psutil.Process(pid)
                if any(str(self.run_dir) in part for part in rank.cmdline()):
                    alive.append(rank)
        return alive

    def watch(self, process: Launchers, results: dict, launched: float):
        index, clock_from = 0, None  # the snippet being watched and when its time limit started
        memory = MemoryWatch(self.settings.memory_limit_mb)
        try:
            while index < len(self.batch):
                spec = self.batch[index]
                events = read_events(self.run_dir)
                if len(events) < self.settings.num_processes:
                    process.watch()  # a rank's pid is known from its status file only once it is ready
                if clock_from is None and any(events.values()):
                    clock_from = time.monotonic()
                # Polled every 0.1 s: look only at status lines and traceback files; read reports when done.
                mine = [e for rank_events in events.values() for e in rank_events if e.get("snippet") == spec.name]
                ends = {e["rank"]: e for e in mine if e["event"] == "end"}
                failed = any((self.run_dir / f"{spec.name}.rank{rank}.traceback").exists() for rank in events)
                started = bool(mine)
                exited = process.poll() is not None
                pids = rank_pids(events)
                info = self.info(launch_seconds=round(time.monotonic() - launched, 2))

                if events and len(ends) == len(events) and all(e["ok"] for e in ends.values()) and not failed:
                    ranks = self.outcome(spec, events)
                    seconds = max(o.seconds for o in ranks.values())
                    info["peak_rss_mib"] = memory.take_peak()
                    results[spec.name] = SnippetRun(spec.name, spec.path, "finished", ranks, None, seconds, info)
                    index, clock_from = index + 1, time.monotonic()
                    continue
                too_big = memory.over_limit(events)
                if too_big:
                    kill_tree(process, self.rank_pids())
                    ranks = self.outcome(spec, read_events(self.run_dir))
                    results[spec.name] = SnippetRun(spec.name, spec.path, "crashed", ranks, too_big, None, info)
                    return results, self.batch[index + 1 :]
                if failed or (exited and started):
                    time.sleep(0.5 if not exited else 0)  # let a dying launcher finish writing
                    kill_tree(process, self.rank_pids())
                    self.output.settle()
                    ranks = self.outcome(spec, read_events(self.run_dir))
                    results[spec.name] = SnippetRun(
                        spec.name, spec.path, "crashed", ranks, self.crash_story(ranks, process), None, info
                    )
                    return results, self.batch[index + 1 :]
                if exited:
                    story = f"the launch ended (exit code {process.returncode}) before any rank started the snippet"
                    return self.fail_rest(results, index, story, info)
                if clock_from is None and time.monotonic() - launched > self.settings.startup_timeout:
                    kill_tree(process, self.rank_pids())
                    story = f"no rank was ready after {self.settings.startup_timeout:.0f} s"
                    return self.fail_rest(results, index, story, info)
                if clock_from is not None and time.monotonic() - clock_from > spec.timeout:
                    # a process that started a snippet is asked too (the start line names its pid)
                    pids += [e["pid"] for e in mine if e["event"] == "start" and e["pid"] not in pids]
                    for pid in pids:  # faulthandler in each rank writes every thread's stack to its faults file
                        try:
                            os.kill(pid, signal.SIGUSR1)
                        except ProcessLookupError:
                            pass
                    time.sleep(STACK_DUMP_WAIT_S)
                    kill_tree(process, self.rank_pids())
                    ranks = self.outcome(spec, read_events(self.run_dir))
                    results[spec.name] = SnippetRun(
                        spec.name, spec.path, "hung", ranks, self.hang_story(spec, ranks), None, info
                    )
                    return results, self.batch[index + 1 :]
                time.sleep(POLL_S)
            try:
                process.wait(timeout=60)  # the ranks' last barrier, then the launcher's exit
            except subprocess.TimeoutExpired:
                pass
            return results, []
        finally:
            kill_tree(process, self.rank_pids())

    def fail_rest(self, results: dict, index: int, story: str, info: dict):
        """The launch itself failed: every snippet not yet run fails with the launch log."""
        self.output.settle()
        story += f"; launch log:\n{read_text(self.log_path, 6000)}"
        for rest in self.batch[index:]:
            results[rest.name] = SnippetRun(rest.name, rest.path, "launch_failed", {}, story, None, info)
        return results, []

    def crash_story(self, ranks: dict, process: Launchers) -> str:
        lines = []
        raised = sorted((o for o in ranks.values() if o.traceback), key=lambda o: (o.ended_at or float("inf"), o.rank))
        for order, outcome in enumerate(raised):
            if order == 0:
                lines.append(f"rank {outcome.rank} raised:\n{outcome.traceback}")
            else:  # its peer was gone: the collective it was in failed, a consequence rather than a cause
                last_line = outcome.traceback.strip().splitlines()[-1]
                lines.append(f"after that, rank {outcome.rank} failed too: {last_line}")
        if not lines:
            lines.append(f"a rank exited without a Python traceback (launcher exit code {process.returncode})")
            lines += self.killed_ranks(ranks)
            for faults in sorted(self.run_dir.glob("rank*.faults")):
                if faults.stat().st_size:
                    lines.append(f"{faults.name}:\n{read_text(faults, 4000)}")
            lines.append(f"launch log:\n{read_text(self.log_path, 4000)}")
        return "\n".join(lines)

    def killed_ranks(self, ranks: dict) -> list[str]:
        """'rank N died from SIGKILL' for each rank the launcher's error summary says a signal ended."""
        found = []
        summary = read_text(self.log_path, 200000)
        # torchelastic's summary: one block per failed rank, "  rank      : 1 (local_rank: 1)" and on the
        # very next line its "  exitcode  : -15 (pid: ...)"; a rank is listed once (root cause or not).
        blocks = re.findall(r"^\[\d+\]:\n(?:.*\n)*?\s*rank\s*:\s*(\d+)[^\n]*\n\s*exitcode\s*:\s*(-?\d+)", summary, re.M)
        for rank, code in dict(blocks).items():
            unfinished = int(rank) in ranks and not ranks[int(rank)].finished
            if int(code) < 0:
                try:
                    how = f"was killed by {signal.Signals(-int(code)).name}"
                except ValueError:
                    how = f"ended by signal {-int(code)}"
                found.append(f"rank {rank} {how}" + (" while in this snippet" if unfinished else ""))
            elif unfinished:
                found.append(f"rank {rank} exited with code {code} while in this snippet")
        return found

    def hang_story(self, spec: SnippetSpec, ranks: dict) -> str:
        waiting = sorted(rank for rank, outcome in ranks.items() if not outcome.finished)
        lines = [f"did not finish within {spec.timeout:.0f} s on rank(s) {waiting}; all its processes were killed"]
        for rank in waiting:
            lines.append(f"rank {rank} was here when stopped:\n{read_text(self.run_dir / f'rank{rank}.faults', 6000)}")
        return "\n".join(lines)


def run_snippets(
    specs: list[SnippetSpec], settings: LaunchSettings, work_dir: Path, mode: str = "grouped"
) -> dict[str, SnippetRun]:
    """Runs every snippet once; a crash or a hang ends that launch and the rest go on in a new one."""
    if mode not in ("grouped", "isolated"):
        raise ValueError(f"mode must be grouped or isolated, not {mode!r}")
    results: dict[str, SnippetRun] = {}
    queue = [[spec] for spec in specs] if mode == "isolated" else ([list(specs)] if specs else [])
    launch_number = 0
    while queue:
        batch = queue.pop(0)
        launch_number += 1
        done, rest = Launch(batch, settings, work_dir / f"launch-{launch_number:03d}", mode).run()
        results.update(done)
        if rest:
            queue.insert(0, rest)
    return results
