"""Evidence levels (data/levels-spec.md): which level backs each claim and source of a page, and the
`<!-- evidence: LEVEL ID[, LEVEL ID] -->` markers that label its Mechanism paragraphs.

- a claim is measured, or modelled when it declares `level: modelled`, or GPU-ready when its proof has
  `requires: cuda`;
- a source (a checked quote in the page's `sources:`) is sourced.

A marker follows the paragraph, list or table it labels (on the next line or after a blank line). A list
is one block until a marker ends it; an indented block or a code block belongs to the paragraph above it.
Headings and other HTML comments need no label.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from verify.pages import Page
from verify.paths import DOCS_DIR, LEVELS_BACKLOG

LEVELS = ("measured", "modelled", "sourced", "gpu-ready")
CLAIM_LEVELS = ("measured", "modelled", "gpu-ready")
MECHANISM = "## Mechanism"
MARKER = re.compile(r"^[ \t]*<!--[ \t]*evidence:(?P<body>.*?)-->[ \t]*$")
FENCE = re.compile(r"^[ \t]*(```|~~~)")
LIST_ITEM = re.compile(r"^([*+-]|\d+[.)])[ \t]")
PAIR = re.compile(r"^(?P<level>[a-z-]+)[ \t]+(?P<id>[A-Za-z0-9_]+)$")


@dataclass(frozen=True)
class Marker:
    line: int  # in the file, from 1
    pairs: tuple  # ((level, id), ...)
    problems: tuple = ()  # what could not be read


@dataclass
class Block:
    """A paragraph, list or table (or a heading, a code block, a lone comment: `statement` False)."""

    line: int
    lines: list = field(default_factory=list)
    statement: bool = True
    is_list: bool = False
    comment: bool = False
    marker: Marker | None = None

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def claim_levels(page: Page) -> dict[str, str]:
    """claim id -> its level."""
    return {claim_id: "gpu-ready" if proof.requires == "cuda" else (claim.level or "measured")
            for proof in page.proofs for claim_id, claim in proof.claims.items()}  # fmt: skip


def id_levels(page: Page) -> dict[str, str]:
    """Every id a marker may name on this page -> the level it backs."""
    return {**claim_levels(page), **{source_id: "sourced" for source_id in page.sources}}


def evidence_mix(page: Page) -> Counter:
    """How many claims and checked quotes back the page, per level."""
    return Counter(id_levels(page).values())


def body_and_first_line(path: Path) -> tuple[str, int]:
    """The page without its front matter, and the file line (from 1) its first line is on."""
    text = path.read_text(encoding="utf-8")
    if text.startswith("---"):
        parts = text.split("\n---", 1)
        if len(parts) == 2:
            head, rest = parts
            rest = rest.split("\n", 1)[1] if "\n" in rest else ""
            return rest, head.count("\n") + 3
    return text, 1


def parse_marker(body: str, line: int) -> Marker:
    pairs, problems = [], []
    if not body.strip():
        return Marker(line=line, pairs=(), problems=("an evidence marker names no level and id",))
    for item in (piece.strip() for piece in body.split(",")):
        found = PAIR.match(item)
        if not found:
            problems.append(f"{item!r} is not 'LEVEL ID'")
        elif found["level"] not in LEVELS:
            problems.append(f"{found['level']!r} is not a level ({', '.join(LEVELS)})")
        else:
            pairs.append((found["level"], found["id"]))
    return Marker(line=line, pairs=tuple(pairs), problems=tuple(problems))


def markers(text: str, first_line: int = 1) -> list[Marker]:
    """Every evidence marker in a page's Markdown (code blocks excepted)."""
    found, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=first_line):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and MARKER.match(line):
            found.append(parse_marker(MARKER.match(line)["body"], number))
    return found


def has_evidence_markers(page: Page) -> bool:
    return "<!--" in page.path.read_text(encoding="utf-8") and bool(markers(*body_and_first_line(page.path)))


def mechanism_lines(text: str, first_line: int = 1) -> list[tuple[int, str]]:
    """(file line, text) of the lines under `## Mechanism`, up to the next heading of level 1 or 2."""
    lines, inside, fenced = [], False, False
    for number, line in enumerate(text.splitlines(), start=first_line):
        if FENCE.match(line):
            fenced = not fenced
        if not fenced and re.match(r"^#{1,2} ", line):
            if inside:
                break
            inside = line.rstrip() == MECHANISM
            continue
        if inside:
            lines.append((number, line))
    return lines


def mechanism_blocks(text: str, first_line: int = 1) -> tuple[list[Block], list[str]]:
    """The Mechanism section's blocks, each with the marker that labels it, and the markers that label nothing."""
    blocks: list[Block] = []
    stray: list[str] = []
    current: Block | None = None
    fenced = False

    def close():
        nonlocal current
        if current is not None and current.lines:
            blocks.append(current)
        current = None

    for number, line in mechanism_lines(text, first_line):
        if fenced:
            current.lines.append(line)
            fenced = not FENCE.match(line)
            continue
        marker = MARKER.match(line)
        if marker:
            close()
            # the block above, past any other comment (`<!-- mutant: ... -->`) between them
            target = next((block for block in reversed(blocks) if not block.comment), None)
            if target is None or not target.statement or target.marker is not None:
                stray.append(f"line {number}: an evidence marker that follows no unlabelled paragraph, list or table")
            else:
                target.marker = parse_marker(marker["body"], number)
            continue
        if not line.strip():
            close()
            continue
        if current is not None:
            if FENCE.match(line):
                fenced = True
            current.lines.append(line)
            if re.match(r"^#{3,6} ", line):  # a heading closes what it follows
                close()
            continue
        previous = blocks[-1] if blocks else None
        heading = re.match(r"^#{3,6} ", line)
        opens_fence = bool(FENCE.match(line))
        joins = previous is not None and previous.statement and previous.marker is None and not heading and (
            line[:1] in (" ", "\t") or opens_fence or (previous.is_list and LIST_ITEM.match(line))
        )  # fmt: skip
        if joins:
            blocks.pop()
            current = previous
        else:
            comment = line.lstrip().startswith("<!--")
            current = Block(line=number, statement=not (heading or opens_fence or comment),
                            is_list=bool(LIST_ITEM.match(line)), comment=comment)  # fmt: skip
        current.lines.append(line)
        fenced = opens_fence
        if heading:
            close()
    close()
    return blocks, stray


def unlabelled(page: Page) -> list[Block]:
    text, first = body_and_first_line(page.path)
    return [block for block in mechanism_blocks(text, first)[0] if block.statement and block.marker is None]


def problems(page: Page) -> list[str]:
    """What is wrong with a page's evidence labels, each naming the page and line."""
    text, first = body_and_first_line(page.path)
    known = id_levels(page)
    found = []
    for marker in markers(text, first):
        found += [f"{page.path}:{marker.line}: {problem}" for problem in marker.problems]
        for level, name in marker.pairs:
            if name not in known:
                found.append(f"{page.path}:{marker.line}: {name!r} is neither a claim nor a source of this page")
            elif known[name] != level:
                found.append(f"{page.path}:{marker.line}: {name!r} is {known[name]}, not {level}")
    found += [f"{page.path}: {problem}" for problem in mechanism_blocks(text, first)[1]]
    for fact in page.key_facts:
        named = fact.get("source")
        if isinstance(named, str) and re.fullmatch(r"[a-z][a-z0-9_]*", named) and named not in page.sources:
            found.append(f"{page.path}: key fact names source {named!r}, which is not in its sources:")
    return found


def backlog(path: Path = LEVELS_BACKLOG) -> list[str]:
    """Pages (paths relative to docs/) whose Mechanism is not labelled yet."""
    if not path.exists():
        return []
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]  # fmt: skip


def page_key(page: Page, docs_dir: Path = DOCS_DIR) -> str:
    return page.path.relative_to(docs_dir).as_posix()
