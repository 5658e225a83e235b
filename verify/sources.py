"""Checked quotes: a page's `sources:` entries found, word for word, in the file they name.

A quote is either in an installed package's file (`in: installed:torch/distributed/distributed_c10d.py`,
read from the site-packages folder that holds the package's top module, so a release that changes the
code fails the page) or in a dated excerpt of a source that is not installed (`in: excerpt:NAME`, the
file data/excerpts/NAME.md with its url and pinned version). The format is data/levels-spec.md.

Whitespace is normalised on both sides (a line break in YAML or in the source is one space). A quote may
leave words out with `...`: its parts must then occur in that order.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from verify import schema
from verify.paths import EXCERPTS_DIR

EXCERPT = "excerpt:"
INSTALLED = "installed:"
ELLIPSIS = re.compile(r"\.\.\.|\u2026")


class SourceError(ValueError):
    """A source that cannot be read: a missing excerpt or package, or an excerpt without its url or version."""


@dataclass(frozen=True)
class Excerpt:
    name: str
    path: Path
    meta: schema.ExcerptMeta
    text: str  # the passages, without the front matter


def normalised(text: str) -> str:
    return " ".join(text.split())


@functools.lru_cache(maxsize=256)
def normalised_source(text: str) -> str:
    # a file is quoted many times (accelerator.py over 100): normalise it once; a str caches its own hash
    return normalised(text)


def quote_found(quote: str, text: str) -> bool:
    """Every part of the quote (split at `...`) occurs in the text, in order, whitespace normalised."""
    haystack, start = normalised_source(text), 0
    for part in (normalised(piece) for piece in ELLIPSIS.split(quote)):
        if not part:
            continue
        found = haystack.find(part, start)
        if found < 0:
            return False
        start = found + len(part)
    return True


def kind_and_target(where: str) -> tuple[str, str]:
    """('excerpt', 'nccl-env-vars') or ('installed', 'torch/distributed/distributed_c10d.py')."""
    for prefix in (EXCERPT, INSTALLED):
        if where.startswith(prefix):
            return prefix[:-1], where[len(prefix):]
    raise SourceError(f"{where!r} is neither {EXCERPT}NAME nor {INSTALLED}PATH")


def site_packages_of(module: str) -> Path:
    """The folder that holds an installed top-level module, found without importing it (torch takes 3 s)."""
    return _site_packages_of(module, tuple(sys.path))  # the release matrix puts another accelerate first


@functools.lru_cache(maxsize=None)
def _site_packages_of(module: str, _search_path: tuple) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None:
        raise SourceError(f"package {module!r} is not installed")
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))).parent
    if spec.origin:
        return Path(spec.origin).parent
    raise SourceError(f"package {module!r} has no files on disk")


def installed_file(relative: str) -> Path:
    """site-packages/<relative> for the installation of the path's first component."""
    top = relative.split("/")[0]
    module = top[:-3] if top.endswith(".py") else top
    path = site_packages_of(module) / relative
    if not path.is_file():
        raise SourceError(f"{relative} is not a file of the installed {module} ({path})")
    return path


def excerpt_path(name: str, excerpts_dir: Path = EXCERPTS_DIR) -> Path:
    return excerpts_dir / f"{name}.md"


def load_excerpt(name: str, excerpts_dir: Path = EXCERPTS_DIR) -> Excerpt:
    path = excerpt_path(name, excerpts_dir)
    if not path.is_file():
        raise SourceError(f"excerpt {name!r} does not exist: {path}")
    return _load_excerpt(path, path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=None)
def _load_excerpt(path: Path, _modified_ns: int) -> Excerpt:
    text = path.read_text(encoding="utf-8")
    parts = text.split("\n---", 1) if text.startswith("---") else []
    if len(parts) < 2:
        raise SourceError(f"{path}: an excerpt starts with front matter (title, url, at, retrieved) between '---' lines")
    try:
        meta = schema.ExcerptMeta.model_validate(yaml.safe_load(parts[0][3:]) or {})
    except (yaml.YAMLError, ValidationError) as error:
        raise SourceError(f"{path}: {error}") from None
    return Excerpt(name=path.stem, path=path, meta=meta, text=parts[1].split("\n", 1)[-1])


def source_text(where: str, excerpts_dir: Path = EXCERPTS_DIR) -> tuple[Path, str]:
    """(file, text to search) of a source's `in:`."""
    kind, target = kind_and_target(where)
    if kind == "excerpt":
        excerpt = load_excerpt(target, excerpts_dir)
        return excerpt.path, excerpt.text
    path = installed_file(target)
    return path, _read(path, path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=None)
def _read(path: Path, _modified_ns: int) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def quote_problem(page_path: Path, source_id: str, entry: dict, excerpts_dir: Path = EXCERPTS_DIR) -> str | None:
    """None when the quote is in its source; else what failed, naming the page, the source id, the quote, the file."""
    where = entry.get("in", "")
    try:
        path, text = source_text(where, excerpts_dir)
    except SourceError as error:
        return f"{page_path}: source {source_id!r} ({where}): {error}"
    if quote_found(entry.get("quote", ""), text):
        return None
    return (f"{page_path}: source {source_id!r}: the quote is not in {path} (whitespace normalised)\n"
            f"  quote: {normalised(entry.get('quote', ''))}")  # fmt: skip


def cited_excerpts(pages) -> dict[str, list[str]]:
    """excerpt name -> the pages (and source ids) citing it, as 'slug:source_id'."""
    cited: dict = {}
    for page in pages:
        for source_id, entry in page.sources.items():
            kind, target = kind_and_target(entry["in"])
            if kind == "excerpt":
                cited.setdefault(target, []).append(f"{page.slug}:{source_id}")
    return cited


def excerpt_names(excerpts_dir: Path = EXCERPTS_DIR) -> list[str]:
    return sorted(path.stem for path in excerpts_dir.glob("*.md") if path.name != "README.md")
