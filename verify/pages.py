"""Question pages and the proofs they declare in their front matter.

Pages live in `docs/questions/<topic>/`, their snippets in `snippets/<topic>/`; a page names a snippet
by its file name alone, and file names are unique across the snippets folder.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import ValidationError

from verify import schema
from verify.paths import DOCS_DIR, ROOT, SNIPPETS_DIR

REPO_URL = "https://github.com/accelerate-interview-proofs/accelerate-interview-proofs"
QUESTIONS = "questions"
DEFAULT_TIMEOUT_S = 120.0
DIFFICULTIES = schema.DIFFICULTIES
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: the site reads every page often


class UniqueKeyLoader(SAFE_LOADER):
    """PyYAML keeps the last of two equal keys: a claim declared twice would lose its first definition
    without a word. This loader refuses the page instead, naming both lines."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is not None and key in seen and key != "<<":
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} declared twice (lines {seen[key] + 1} and {key_node.start_mark.line + 1})",
                    key_node.start_mark,
                )  # fmt: skip
            seen.setdefault(key, key_node.start_mark.line)
        return super().construct_mapping(node, deep)


class PageError(ValueError):
    """A page whose front matter cannot be used; it fails alone, naming its file (and line)."""


@dataclass(frozen=True)
class Claim:
    says: str  # one sentence: what the numbers show
    control: str | None = None  # what the negative control removes, e.g. "no_sync, so no all-reduce"
    since: str | None = None  # first Accelerate release the claim holds for (None: any)
    until: str | None = None  # last release it holds for (None: any)
    breaks_when: tuple = ()  # every mutant that must make it fail (MUTANTS-SPEC.md)
    through_control: tuple = ()  # those of them allowed to make it fail by its control alone
    no_mutant: str | None = None  # why no mutant can break it
    level: str | None = None  # "modelled" for a model run on CPU; None: measured (data/levels-spec.md)
    omits: tuple = ()  # the arguments its run leaves at their defaults (verify/website/prose.py)

    def holds_on(self, release: str) -> bool:
        """Whether this claim says it holds on this Accelerate release."""
        from packaging.version import Version

        version = Version(release)
        return (self.since is None or version >= Version(self.since)) and (
            self.until is None or version <= Version(self.until)
        )


@dataclass(frozen=True)
class Proof:
    page: str  # the page's slug
    snippet: str  # file name, found anywhere under the snippets folder
    claims: dict  # claim id -> Claim
    timeout: float = DEFAULT_TIMEOUT_S
    requires: str | None = None  # "cuda" for a claim that needs a GPU
    processes: int | None = None  # a proof written for exactly this many ranks; None: any count (--nproc)
    nodes: int | None = None  # a proof written for exactly this many nodes; None: any count (--nnodes)
    snippets_dir: Path = SNIPPETS_DIR

    @property
    def path(self) -> Path:
        return find_snippet(self.snippet, self.snippets_dir)

    def world_size(self, default: int) -> int:
        return self.processes or default

    @property
    def name(self) -> str:
        return Path(self.snippet).stem


@dataclass(frozen=True)
class Page:
    slug: str
    path: Path
    meta: dict
    proofs: tuple = field(default=())
    error: str | None = None  # set when the front matter is unusable; the page then proves nothing

    @property
    def title(self) -> str:
        return self.meta.get("title", self.slug)

    @property
    def topic(self) -> str | None:
        """The topic folder a question page sits in (docs/questions/<topic>/page.md)."""
        parts = self.path.parts
        if QUESTIONS in parts[:-1] and parts[-2] != QUESTIONS and self.path.name != "index.md":
            return parts[-2]
        return None

    @property
    def difficulty(self) -> str | None:
        return self.meta.get("difficulty")

    @property
    def key_facts(self) -> list:
        return self.meta.get("key_facts") or []

    @property
    def handout_errors(self) -> list:
        return self.meta.get("handout_errors") or []

    @property
    def sources(self) -> dict:
        """Checked quotes, source id -> {quote, in, backs} (validated by verify/schema.py)."""
        return self.meta.get("sources") or {}

    @property
    def claim_ids(self) -> list[str]:
        return [claim for proof in self.proofs for claim in proof.claims]


def find_snippet(name: str, snippets_dir: Path = SNIPPETS_DIR) -> Path:
    """snippets/<topic>/<name>; a name that is nowhere gives the path it would have at the top."""
    # Compared as names, never as glob patterns: '*.py' must not find _claims.py.
    found = sorted(path for path in snippets_dir.rglob("*.py") if path.name == name)
    return found[0] if found else snippets_dir / name


def header_text(path: Path) -> str | None:
    """The YAML between the opening '---' and the closing one; its line 0 is the file's line 1."""
    text = path.read_text(encoding="utf-8-sig")  # as mkdocs reads it: a byte-order mark must not hide the proofs
    if not text.startswith("---"):
        return None
    parts = text.split("\n---", 1)
    if len(parts) < 2:
        raise PageError(f"{path}: front matter opened with '---' is never closed")
    return parts[0][3:]


def front_matter(path: Path) -> dict:
    header = header_text(path)
    if header is None:
        return {}
    try:
        meta = yaml.load(header, Loader=UniqueKeyLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)  # the header starts on line 1, as in the file
        raise PageError(f"{where}: malformed front matter: {getattr(error, 'problem', None) or error}") from None
    if meta is not None and not isinstance(meta, dict):
        raise PageError(f"{path}: front matter must be a mapping, not {type(meta).__name__}")
    return meta or {}


def validated(path: Path, meta: dict, model, header: str | None, first_line: int = 1, under: tuple = ()):
    """The front matter checked against its schema (verify/schema.py); a PageError names file and line."""
    try:
        return model.model_validate(meta)
    except ValidationError as error:
        node = yaml.compose(header, Loader=SAFE_LOADER) if header else None
        problems = schema.located(error, node, first_line, under)
        raise PageError("\n".join(f"{path}:{problem}" for problem in problems)) from None


def claim_from(entry: schema.ClaimEntry) -> Claim:
    return Claim(
        says=entry.says, control=entry.control, since=entry.since, until=entry.until,
        breaks_when=tuple(entry.breaks_when or ()) + tuple(entry.breaks_control_when or ()),
        through_control=tuple(entry.breaks_control_when or ()), no_mutant=entry.no_mutant, level=entry.level,
        omits=tuple(entry.omits or ()),
    )  # fmt: skip


def parse_proofs(path: Path, meta: schema.PageMeta, snippets_dir: Path) -> tuple:
    proofs, seen = [], {}
    for entry in meta.proofs or []:
        if any(proof.snippet == entry.snippet for proof in proofs):  # its evidence is kept per page and snippet
            raise PageError(f"{path}: snippet {entry.snippet} is named by two proofs; declare its claims in one")
        for claim_id in entry.claims:
            if claim_id in seen:  # verdicts are per snippet, but a reader and `-k` name a claim by its id
                raise PageError(
                    f"{path}: claim id {claim_id!r} is declared by both {seen[claim_id]} and {entry.snippet}"
                )
            seen[claim_id] = entry.snippet
        proofs.append(
            Proof(
                page=path.stem,
                snippet=entry.snippet,
                claims={claim_id: claim_from(claim) for claim_id, claim in entry.claims.items()},
                timeout=float(entry.timeout or DEFAULT_TIMEOUT_S),
                requires=entry.requires,
                processes=entry.processes,
                nodes=entry.nodes,
                snippets_dir=snippets_dir,
            )
        )
    return tuple(proofs)


def load_page(path: Path, snippets_dir: Path = SNIPPETS_DIR) -> Page:
    """The page and its proofs; a page whose front matter is unusable comes back with `error` set."""
    return _load_page(path, path.stat().st_mtime_ns, snippets_dir)


@functools.lru_cache(maxsize=None)
def _load_page(path: Path, _modified_ns: int, snippets_dir: Path) -> Page:
    """Read once per version of the file: the site's hooks ask for each page many times per build."""
    try:
        meta = front_matter(path)
        checked = validated(path, meta, schema.PageMeta, header_text(path))
        return Page(slug=path.stem, path=path, meta=meta, proofs=parse_proofs(path, checked, snippets_dir))
    except PageError as error:
        return Page(slug=path.stem, path=path, meta={}, error=str(error))


def load_pages(docs_dir: Path = DOCS_DIR, snippets_dir: Path = SNIPPETS_DIR) -> list[Page]:
    return [load_page(path, snippets_dir) for path in sorted(docs_dir.rglob("*.md"))]


def question_pages(pages: list[Page]) -> list[Page]:
    return [page for page in pages if page.topic]


def all_proofs(pages: list[Page]) -> list[Proof]:
    return [proof for page in pages for proof in page.proofs]
