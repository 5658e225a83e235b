"""Mutants: named, plausible library bugs that a claim must catch.

A mutant patches accelerate or torch the way a wrong answer says the library behaves ("DDP sums the
gradients"). `pytest verify --mutants` runs each snippet once more per mutant its claims name, in the
same grouped launch, and requires each of those claims to FAIL by its measured value. A proof that
still passes in the wrong world does not test what its page says.

Mutants live beside the snippets of their topic, in `snippets/<topic>/_mutants.py`:

    from verify.mutation import mutant

    @mutant("ddp-sums-gradients", "DDP sums the gradients across ranks instead of averaging them")
    def ddp_sums_gradients(patch):
        from torch.nn.parallel import DistributedDataParallel
        patch.wrap(DistributedDataParallel, "__init__", ...)

Imports belong inside the mutant: the catalogue is read by the pytest process, which never imports
torch for it. This module is imported by the ranks too, so it imports nothing heavy either.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from verify.paths import SNIPPETS_DIR

MUTANTS_FILE = "_mutants.py"
_MISSING = object()


class MutantError(ValueError):
    """A catalogue that cannot be used: a duplicate name, a mutant without a description."""


@dataclass(frozen=True)
class Mutant:
    name: str
    describes: str  # one line a reader understands: the wrong world this mutant makes
    apply: Callable  # apply(patch)
    source: Path  # the _mutants.py that defines it


def mutant(name: str, describes: str):
    """Marks a function `f(patch)` as the mutant `name`; the catalogue finds it in its module."""

    def mark(function):
        function.mutant = (name, describes)
        return function

    return mark


def _load_module(path: Path):
    # Not put into sys.modules: a rank loads a mutants file afresh for each run, and the next snippet
    # must not find anything of it left behind.
    spec = importlib.util.spec_from_file_location(f"_mutants_of_{path.parent.name.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mutants_in(path: Path) -> dict[str, Mutant]:
    found = {}
    try:
        module = _load_module(path)
    except Exception as error:  # noqa: BLE001  a syntax or import error of one file, named, not a crash
        raise MutantError(f"{path}: cannot be loaded: {type(error).__name__}: {error}") from error
    for value in vars(module).values():
        if callable(value) and hasattr(value, "mutant"):
            name, describes = value.mutant
            if name in found:
                raise MutantError(f"{path}: mutant {name!r} is defined twice")
            if not describes or not describes.strip():
                raise MutantError(f"{path}: mutant {name!r} has no description")
            found[name] = Mutant(name, describes.strip(), value, path)
    return found


@functools.lru_cache(maxsize=None)
def _catalogue(snippets_dir: Path, _versions: tuple) -> tuple[dict[str, Mutant], tuple[str, ...]]:
    found: dict[str, Mutant] = {}
    problems = []
    for path in sorted(snippets_dir.glob(f"*/{MUTANTS_FILE}")):
        try:
            mutants = mutants_in(path)
        except MutantError as error:  # this file's mutants are unknown; every other file's still count
            problems.append(str(error))
            continue
        for name, one in mutants.items():
            if name in found:
                raise MutantError(f"mutant {name!r} is defined in both {found[name].source} and {path}")
            found[name] = one
    return found, tuple(problems)


def _versions(snippets_dir: Path) -> tuple:
    return tuple((str(path), path.stat().st_mtime_ns) for path in sorted(snippets_dir.glob(f"*/{MUTANTS_FILE}")))


def catalogue(snippets_dir: Path = SNIPPETS_DIR) -> dict[str, Mutant]:
    """Every mutant under snippets/*/_mutants.py, by name (names are unique across topics); a file that
    cannot be loaded adds none (see `problems`)."""
    return _catalogue(snippets_dir, _versions(snippets_dir))[0]


def problems(snippets_dir: Path = SNIPPETS_DIR) -> list[str]:
    """'FILE: cannot be loaded: ...' for each _mutants.py that raises when loaded."""
    return list(_catalogue(snippets_dir, _versions(snippets_dir))[1])


class Patch:
    """The changes one mutant makes for one snippet run, undone afterwards; knows whether they ran."""

    def __init__(self):
        # Set when mutated code executes: a mutant that never ran proves nothing. Kept in shared memory, so
        # that a process the snippet forks (notebook_launcher's workers, a child that rebuilds a world)
        # records it too; the rank reads it after the snippet.
        from multiprocessing.sharedctypes import RawValue

        self._reached = RawValue("b", 0)
        self.targets: list[str] = []  # what it patched, to name in "the snippet never reaches ..."
        self._undo: list[Callable] = []

    @property
    def reached(self) -> bool:
        return bool(self._reached.value)

    @reached.setter
    def reached(self, value: bool):
        self._reached.value = 1 if value else 0

    def ran(self):
        """Record by hand that the mutated behaviour happened (for constants, classes, properties)."""
        self.reached = True

    def wrap(self, owner, name: str, replacement: Callable):
        """owner.name becomes a function calling `replacement(original, *args, **kwargs)`."""
        raw = inspect.getattr_static(owner, name)
        if isinstance(raw, staticmethod):
            original, rewrap = raw.__func__, staticmethod
        elif isinstance(raw, classmethod):
            original, rewrap = raw.__func__, classmethod
        else:
            original, rewrap = raw, (lambda function: function)

        @functools.wraps(original)
        def mutated(*args, **kwargs):
            self.reached = True
            return replacement(original, *args, **kwargs)

        self._set(owner, name, rewrap(mutated))

    def replace(self, owner, name: str, value):
        """owner.name becomes `value`; a plain function is recorded as run when it is called."""
        if inspect.isfunction(value):
            function = value

            @functools.wraps(function)
            def value(*args, **kwargs):
                self.reached = True
                return function(*args, **kwargs)

        self._set(owner, name, value)

    def setenv(self, name: str, value: str):
        before = os.environ.get(name)
        os.environ[name] = value
        self._undo.append(lambda: os.environ.pop(name, None) if before is None else os.environ.update({name: before}))
        self.targets.append(f"${name}")

    def delenv(self, name: str):
        before = os.environ.pop(name, None)
        self._undo.append(lambda: before is not None and os.environ.update({name: before}))
        self.targets.append(f"${name}")

    def _set(self, owner, name: str, value):
        own = vars(owner).get(name, _MISSING)  # restore what the owner itself held, not an inherited one
        setattr(owner, name, value)
        self._undo.append(lambda: delattr(owner, name) if own is _MISSING else setattr(owner, name, own))
        self.targets.append(f"{getattr(owner, '__qualname__', None) or getattr(owner, '__name__', owner)}.{name}")

    def undo(self):
        while self._undo:
            self._undo.pop()()


def apply(name: str, source: str) -> Patch:
    """In a rank: load the mutant `name` from its file and apply it; the caller undoes the patch."""
    found = mutants_in(Path(source))
    if name not in found:
        raise MutantError(f"{source} defines no mutant {name!r}")
    patch = Patch()
    try:
        found[name].apply(patch)
    except BaseException:
        patch.undo()
        raise
    return patch


def named_mutants(proof) -> list[str]:
    """The mutants a proof's claims name, in the order they first appear."""
    return list(dict.fromkeys(name for claim in proof.claims.values() for name in claim.breaks_when))


def catalogue_problems(proof) -> list[str]:
    """The problems of the catalogues `catalogue_for(proof)` reads."""
    found = problems(SNIPPETS_DIR)
    if Path(proof.snippets_dir).resolve() != SNIPPETS_DIR.resolve():
        found += problems(Path(proof.snippets_dir))
    return found


def catalogue_for(proof) -> dict[str, Mutant]:
    """The mutants a proof can name: the project's, and those of its own snippets folder (a test's)."""
    found = dict(catalogue(SNIPPETS_DIR))
    if Path(proof.snippets_dir).resolve() != SNIPPETS_DIR.resolve():
        found.update(catalogue(Path(proof.snippets_dir)))
    return found
