"""Question pages and the proofs they declare in their front matter."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS_DIR = ROOT / "docs"
SNIPPETS_DIR = ROOT / "snippets"
DEFAULT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Proof:
    page: str  # the page's slug
    snippet: str  # file name inside the snippets folder
    claims: dict  # claim id -> one-sentence statement
    timeout: float = DEFAULT_TIMEOUT_S
    requires: str | None = None  # "cuda" for a claim that needs a GPU
    processes: int | None = None  # a proof written for exactly this many ranks; None: any count (--nproc)
    snippets_dir: Path = SNIPPETS_DIR

    @property
    def path(self) -> Path:
        return self.snippets_dir / self.snippet

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

    @property
    def title(self) -> str:
        return self.meta.get("title", self.slug)

    @property
    def handout_errors(self) -> list:
        return self.meta.get("handout_errors") or []


def front_matter(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return {}
    _, header, _ = text.split("---", 2)
    return yaml.safe_load(header) or {}


def load_page(path: Path, snippets_dir: Path = SNIPPETS_DIR) -> Page:
    meta = front_matter(path)
    slug = path.stem
    proofs = []
    for entry in meta.get("proofs") or []:
        claims = entry.get("claims") or {}
        if not isinstance(claims, dict) or not claims:
            raise ValueError(f"{path}: proof {entry.get('snippet')!r} declares no claims (id: statement)")
        proofs.append(
            Proof(
                page=slug,
                snippet=entry["snippet"],
                claims={str(key): str(value) for key, value in claims.items()},
                timeout=float(entry.get("timeout", DEFAULT_TIMEOUT_S)),
                requires=entry.get("requires"),
                processes=int(entry["processes"]) if entry.get("processes") else None,
                snippets_dir=snippets_dir,
            )
        )
    return Page(slug=slug, path=path, meta=meta, proofs=tuple(proofs))


def load_pages(docs_dir: Path = DOCS_DIR, snippets_dir: Path = SNIPPETS_DIR) -> list[Page]:
    return [load_page(path, snippets_dir) for path in sorted(docs_dir.rglob("*.md"))]


def all_proofs(pages: list[Page]) -> list[Proof]:
    return [proof for page in pages for proof in page.proofs]
