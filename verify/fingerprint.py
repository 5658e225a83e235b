"""What a proof's result depends on, and its digest: equal fingerprints, same verdicts.

The inputs are kept by name (`inputs`), and evidence records them beside the digest, so the site can
say WHAT changed since a run ("its helper _forked_pair.py", "the judge's rules") instead of only that
something did. Only what can change a result is in it: the snippet, the helper modules it imports
(with `_claims.py`, whose relations the judge uses), the file of the mutants its claims name, the
claims' declared ranges and mutants, its time limit, the judge's rules (`judge.JUDGE_RULES_VERSION`,
which a test ties to the judge's behaviour), the code that launches and runs it, the installed
versions and the launch. The site, the schema, the tests, the benchmark and the docs are not: a
change there never makes evidence "out of date".

Each file is read and hashed once per version of it (its size and modification time): a site build
asks for every proof's fingerprint, often several times.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import sys
from pathlib import Path

import warnings

from verify import environment
from verify.judge import JUDGE_RULES_VERSION
from verify.mutation import MutantError, catalogue_for, catalogue_problems
from verify.pages import Proof
from verify.paths import ROOT, SNIPPETS_DIR
from verify.runner import LaunchSettings

HARNESS_DIR = Path(__file__).resolve().parent
# The code between `pytest verify` and the snippet's first line: the launch, the worker that runs it in
# each rank, and the patching of a mutant. The rest of verify/ (pages, session, reuse, the site) is not.
# A kind of proof that runs otherwise names its own (a lab: `verify.labs.LabProof.running_code`).
RUNNING_CODE = ("runner.py", "worker.py", "mutation.py")


def versions() -> dict:
    """python, torch, accelerate and transformers as installed (as the path finds them now)."""
    return dict(_versions(tuple(sys.path)))


@functools.lru_cache(maxsize=8)
def _versions(_path: tuple) -> tuple:
    found = {"python": platform.python_version()}
    for package in ("torch", "accelerate", "transformers"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = None
    return tuple(found.items())


def file_digest(path: Path | str | None) -> str | None:
    if path is None:
        return None
    try:
        stat = os.stat(path)
    except OSError as error:  # the launch will fail on it; the fingerprint just must not match a good run
        return f"unreadable: {error}"
    return _file_digest(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4096)
def _file_digest(path: str, _modified_ns: int, _size: int) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as error:
        return f"unreadable: {error}"


def shown_name(path: Path) -> str:
    """snippets/data-and-evaluation/_forked_pair.py: the same in every clone."""
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return path.name


# `import a, b as c` and `from a.b import c` at any indentation; a match inside a string only adds a file.
IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+([A-Za-z_]\w*)[\w.]*[ \t]+import\b|import[ \t]+([^\n#;]+))", re.M)


def imported_names(path: Path) -> set | None:
    """The top-level module names a Python file imports (anywhere in it); None when it cannot be read.
    A regular expression, not the parser: a superset (an import in a docstring) only adds a helper."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    names = set()
    for source, modules in IMPORT.findall(text):
        if source:
            names.add(source)
        for module in modules.replace("(", " ").replace(")", " ").split(","):
            if module.split():
                names.add(module.split()[0].split(".")[0])
    return names


@functools.lru_cache(maxsize=1024)
def _imported_names(path: str, _modified_ns: int, _size: int) -> frozenset | None:
    found = imported_names(Path(path))
    return frozenset(found) if found is not None else None


def helpers(proof: Proof) -> list[Path]:
    """The modules of the snippets folders that the snippet imports, and those they import in turn, with
    `_claims.py` always (the judge applies its relations). Where a file cannot be read, every `_*.py`
    of those folders counts: a proof is never judged current on a guess."""
    folders = list(dict.fromkeys([proof.path.parent, proof.snippets_dir, SNIPPETS_DIR]))
    found, todo = {SNIPPETS_DIR / "_claims.py"}, [proof.path]
    while todo:
        path = todo.pop()
        stat = os.stat(path)
        names = _imported_names(str(path), stat.st_mtime_ns, stat.st_size)
        if names is None:
            return sorted(found | {helper for folder in folders for helper in folder.glob("_*.py")})
        for name in sorted(names):
            module = next((folder / f"{name}.py" for folder in folders if (folder / f"{name}.py").exists()), None)
            if module is not None and module != proof.path and module not in found:
                found.add(module)
                todo.append(module)
    return sorted(path for path in found if path.exists())


def mutant_sources(proof: Proof) -> list[Path]:
    """The files defining the mutants this proof's claims name: a changed mutant is a changed proof."""
    names = {name for claim in proof.claims.values() for name in claim.breaks_when}
    if not names:
        return []
    try:
        known = catalogue_for(proof)
    except MutantError:
        return []  # the catalogue's own test names the problem
    for problem in catalogue_problems(proof):  # a file that cannot be loaded: named, its mutants unknown
        warnings.warn(problem, UnreadableMutants, stacklevel=2)
    return sorted({Path(known[name].source) for name in names if name in known})


class UnreadableMutants(UserWarning):
    """A _mutants.py that raises when loaded: the proofs naming its mutants fail; nothing else does."""


def ranks_environment(settings: LaunchSettings) -> dict:
    """The variables of the ranks' environment that can change a result (verify/environment.py): a run
    under other TORCH_*, NCCL_*, OMP_*... variables is never reused for this one."""
    return environment.that_matters(settings.environment())


def launch_of(settings: LaunchSettings) -> dict:
    return {
        "num_processes": settings.num_processes,
        "num_machines": settings.num_machines,
        "backend": settings.expected_backend,
        "config_file": settings.config_file,
        "accelerate_config": file_digest(settings.config_file),  # its contents, not only its path
        "extra_args": list(settings.extra_args),
        "memory_limit_mb": settings.memory_limit_mb,
    }


def inputs(proof: Proof, settings: LaunchSettings) -> dict:
    """Every input of a proof's result, by name (JSON): what the evidence records and the site compares."""
    running = getattr(proof, "running_code", RUNNING_CODE)
    return {
        "snippet": file_digest(proof.path),
        "helpers": {shown_name(path): file_digest(path) for path in helpers(proof)},
        "mutants": {shown_name(path): file_digest(path) for path in mutant_sources(proof)},
        # what the judge reads of the page; the sentences and the control's description are the reader's
        "declared": {
            "claims": {claim_id: {"since": claim.since, "until": claim.until, "breaks_when": list(claim.breaks_when),
                                  "through_control": list(claim.through_control)}
                       for claim_id, claim in sorted(proof.claims.items())},
            "timeout": proof.timeout,
            "requires": proof.requires,
        },  # fmt: skip
        "judge": JUDGE_RULES_VERSION,
        "running_code": {f"verify/{name}": file_digest(HARNESS_DIR / name) for name in running},
        "versions": versions(),
        "launch": launch_of(settings),
        "environment": ranks_environment(settings),
    }


def digest(found_inputs: dict) -> str:
    return hashlib.sha256(json.dumps(found_inputs, sort_keys=True).encode()).hexdigest()


def fingerprint(proof: Proof, settings: LaunchSettings) -> str:
    return digest(inputs(proof, settings))


# What changed, in a reader's words: one phrase per input that differs.
WHAT = {
    "snippet": "the snippet",
    "helpers": "its helper modules",
    "mutants": "the mutants its claims name",
    "declared": "the claims' declared release ranges, mutants or time limit",
    "judge": "the judge's rules",
    "running_code": "the harness code that launches and runs it",
    "versions": "the installed versions",
    "launch": "the launch settings",
    "environment": "the ranks' environment variables",
}


def changes(recorded: dict, current: dict) -> list[str]:
    """The inputs that differ, each in words naming the files where it can ('its helper _claims.py')."""
    found = []
    named = {**WHAT, **{key: key.replace("_", " ") for key in {*recorded, *current} if key not in WHAT}}
    for key, words in named.items():
        before, now = recorded.get(key), current.get(key)
        if before == now:
            continue
        if isinstance(before, dict) and isinstance(now, dict) and key in ("helpers", "mutants", "running_code"):
            files = sorted(name for name in {*before, *now} if before.get(name) != now.get(name))
            found.append(f"{words} ({', '.join(Path(name).name for name in files)})")
        else:
            found.append(words)
    return found
