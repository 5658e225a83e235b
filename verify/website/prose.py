"""Checks on what a page says in prose, where no claim reads it: version words without a range, defaults
stated without a run that omits the argument, and the same sentence on several pages.

    python -m verify.website.prose            # every finding, by kind, page and line
    python -m verify.website.prose --backlog  # rewrite data/prose-backlog.yaml from today's findings

Each finding is keyed by its page and the sentence's first words, so that edits elsewhere on the page do
not move it. `data/prose-backlog.yaml` lists the findings that are known and not yet fixed: the test
(tests/test_prose.py) fails on any finding outside it, and on a backlog entry that no longer occurs, so the
backlog can only shrink. A deliberate repeat is marked in `data/deliberate-repeats.yaml` with its reason.

A sentence that names a default is backed when its paragraph carries `<!-- default: claim_id -->` for a claim
of the page that declares `omits:` (the arguments its run leaves out); a version sentence is backed when it
names a release and either a ranged claim of the page has that release as `since`/`until`, or the sentence
says where the statement was read (a tag, a pull request, a commit).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import yaml

from verify.pages import load_pages, question_pages
from verify.paths import DELIBERATE_REPEATS, DOCS_DIR, PROSE_BACKLOG, PYPROJECT

BACKLOG = PROSE_BACKLOG
DELIBERATE = DELIBERATE_REPEATS
SKIPPED_SECTIONS = ("sources",)  # citations repeat by nature
# "up to 4.0" and "up to 4.8e-7" are values, so "up to" counts only before a release's form: v1.8, 1.8.1 or
# a library's name with its number.
RELEASE_FORM = r"(?:v\d+\.\d+|\d+\.\d+\.\d+|(?:torch|pytorch|accelerate|transformers|deepspeed)\s+v?\d+\.\d+)"
VERSION_WORDS = re.compile(
    r"\b(older releases?|newer releases?|earlier releases?|recent releases?|older versions?|newer versions?|"
    r"deprecated|was removed|(?<!will be )removed in|added in|introduced in|first (?:shipped|released) in|"
    r"since v?\d+\.\d+|from v?\d+\.\d+(?:\.\d+)? on|before v?\d+\.\d+|until v?\d+\.\d+|up to " + RELEASE_FORM + r")",
    re.I,
)
# Words that describe the state of one release ("deprecated", a removal it announces), not its history: a
# sentence that says so of the pinned release (pyproject.toml) names the release it is true at.
STATE_WORDS = re.compile(r"^(deprecated)$", re.I)
RELEASE = re.compile(r"\bv?(\d+\.\d+(?:\.\d+)?)\b")
WHERE_READ = re.compile(
    r"(\btag\b|\bPR\s*#?\d+|pull/\d+|pull request|\bcommit\b|\bat v\d|read at|read in|\bsources?\b|released in v?\d)", re.I
)
OWNER_LINK = re.compile(r"\]\([^)]*#[^)]+\)")  # a link to the page (and anchor) that owns the statement
DEFAULT_WORDS = re.compile(r"\b(by default|defaults? to|default is|unless you pass)\b", re.I)
DEFAULT_MARK = re.compile(r"<!--\s*default:\s*([a-z0-9_ ,]+?)\s*-->")
LINK = re.compile(r"\[([^\]]*)\]\(([^)#\s]*)[^)]*\)")
MIN_WORDS = 12  # shorter sentences repeat by chance ("See the page on ...")
SHINGLE = 4
OVERLAP = 0.6  # share of the shorter sentence's word 4-grams found in the other


@dataclass(frozen=True)
class Sentence:
    page: str  # path under docs/
    line: int
    text: str
    paragraph: str  # the raw paragraph it stands in (markers included)
    links: tuple = ()  # the pages (under docs/) its own links point to


    @property
    def key(self) -> str:
        return " ".join(words(self.text)[:8])


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9_]+", text.lower())


def plain(text: str) -> str:
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link keeps its words, not its address
    text = re.sub(r"<https?://[^>]+>|https?://\S+", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def sentences(path: Path) -> list[Sentence]:
    """The prose of a page (front matter, code blocks and the Sources section left out), split into
    sentences, each with the line its paragraph starts on."""
    lines = path.read_text(encoding="utf-8-sig").splitlines()
    start = 0
    if lines and lines[0].strip() == "---":
        start = next(i for i in range(1, len(lines)) if lines[i].strip() == "---") + 1
    found, paragraph, first, section, fenced = [], [], None, "", False
    relative = str(path.relative_to(DOCS_DIR))

    def flush():
        if paragraph and section not in SKIPPED_SECTIONS:
            raw = "\n".join(paragraph)
            targets = [(plain(label), target) for label, target in LINK.findall(raw)]
            for text in re.split(r"(?:(?<=[.!?])|(?<=[.!?]\)))\s+(?=[A-Z`*(\"])", plain(raw)):
                links = tuple(linked_page(relative, target) for label, target in targets if label and label in text)
                found.append(Sentence(relative, first + 1, text, raw, links))
        paragraph.clear()

    for number in range(start, len(lines)):
        line = lines[number]
        if line.strip().startswith(("```", "~~~")):
            fenced = not fenced
            flush()
            continue
        if fenced:
            continue
        if line.startswith("#"):
            flush()
            section = line.lstrip("#").strip().lower()
            continue
        if not line.strip():
            flush()
            continue
        if not paragraph:
            first = number
        paragraph.append(line)
    flush()
    return found


def linked_page(page: str, target: str) -> str:
    """The page under docs/ that a relative link on `page` points to ("" for another site)."""
    if not target or "://" in target or target.startswith("mailto:"):
        return ""
    return os.path.normpath(os.path.join(os.path.dirname(page), target))


def pinned_releases() -> set[str]:
    """'torch 2.13', 'torch 2.13.0', '1.15.0', ...: the ways a sentence names a release pyproject.toml pins."""
    names = set()
    for name, version in re.findall(r'"([A-Za-z0-9_.-]+)==([0-9.]+)"', PYPROJECT.read_text()):
        short = ".".join(version.split(".")[:2])
        names |= {f"{name.lower()} {short}", f"{name.lower()} {version}", version}
    return names


def names_pinned_release(text: str, pinned: set[str]) -> bool:
    lowered = re.sub(r"\b(pytorch|torch)\s+v?", "torch ", text.lower())
    lowered = re.sub(r"\b(accelerate|transformers)\s+v", r"\1 ", lowered)
    named = {f"{lib} {v}" for lib, v in re.findall(r"\b(torch|accelerate|transformers)\s+(\d+\.\d+(?:\.\d+)?)\b", lowered)}
    return bool(named & pinned or set(re.findall(r"\b\d+\.\d+\.\d+\b", lowered)) & pinned)


def page_claims(page) -> dict:
    return {claim_id: claim for proof in page.proofs for claim_id, claim in proof.claims.items()}


def release(version: str) -> str:
    """'1.0' and '1.0.0' name one release."""
    parts = version.split(".")
    return ".".join(parts + ["0"] * (3 - len(parts)))


def range_edges(page) -> set[str]:
    return {release(edge) for claim in page_claims(page).values() for edge in (claim.since, claim.until) if edge}


def version_findings(page, found: list[Sentence], pinned: set[str] | None = None, linked_edges=None) -> list[Sentence]:
    """Version sentences without their backing. A sentence is backed by a ranged claim of its own page, or of a
    page it links to (`linked_edges`: page -> that page's range edges), whose edge is a release it names."""
    edges = range_edges(page)
    pinned = pinned_releases() if pinned is None else pinned
    bad = []
    for sentence in found:
        spoken = [match.group(0) for match in VERSION_WORDS.finditer(sentence.text)]
        if not spoken:
            continue
        releases = {release(found_release) for found_release in RELEASE.findall(sentence.text)}
        reachable = edges.union(*((linked_edges or {}).get(target, set()) for target in sentence.links))
        if releases and (releases & reachable or WHERE_READ.search(sentence.text) or OWNER_LINK.search(sentence.paragraph)):
            continue
        if all(STATE_WORDS.match(word) for word in spoken) and names_pinned_release(sentence.text, pinned):
            continue
        bad.append(sentence)
    return bad


def quoted_spans(text: str) -> list[tuple[int, int]]:
    """Where `text` quotes someone else: "..." or “...” (quote marks inside `code` left out), and `code` itself."""
    code = [match.span() for match in re.finditer(r"`[^`]*`", text)]
    masked = re.sub(r"`[^`]*`", lambda found: "_" * len(found.group(0)), text)
    # an admonition's title (??? note "Why ...?") is the page's own question, not a quotation
    masked = re.sub(r'^([?!]{3}\+?\s+[\w-]+\s+)"([^"]*)"', lambda found: found.group(1) + " " * (len(found.group(2)) + 2),
                    masked)
    return code + [match.span() for match in re.finditer(r'"[^"]*"|“[^”]*”', masked)]


def own_default_words(sentence: Sentence) -> list[str]:
    """The default words the page says itself, not those inside a quotation (of a docstring, a warning, the
    docs under review): the quotation is found in the whole paragraph, since a quote may hold a full stop."""
    paragraph = plain(sentence.paragraph)
    start = paragraph.find(sentence.text)
    text, spans = (paragraph, quoted_spans(paragraph)) if start >= 0 else (sentence.text, quoted_spans(sentence.text))
    start = max(start, 0)
    return [
        match.group(0)
        for match in DEFAULT_WORDS.finditer(text, start, start + len(sentence.text))
        if not any(a <= match.start() and match.end() <= b for a, b in spans)
    ]


def default_findings(page, found: list[Sentence], omitting: set[str], linked_omitting=None) -> list[Sentence]:
    """Default sentences without their backing: a claim that omits the argument, of this page or of a page the
    sentence links to (`linked_omitting`: page -> its claims that declare `omits:`), named in the paragraph."""
    bad = []
    for sentence in found:
        if not own_default_words(sentence):
            continue
        marked = {name.strip() for mark in DEFAULT_MARK.findall(sentence.paragraph) for name in mark.split(",")}
        reachable = omitting.union(*((linked_omitting or {}).get(target, set()) for target in sentence.links))
        if not marked & reachable:
            bad.append(sentence)
    return bad


def repeated(found: list[Sentence]) -> list[tuple[Sentence, Sentence]]:
    """Pairs of near-identical sentences on different pages, unless one of them links to the other's page
    (the statement stands where it is proven, and the other page points there)."""
    grams = []
    index = defaultdict(set)
    for number, sentence in enumerate(found):
        tokens = words(sentence.text)
        shingles = {tuple(tokens[i : i + SHINGLE]) for i in range(len(tokens) - SHINGLE + 1)}
        grams.append(shingles if len(tokens) >= MIN_WORDS else set())
        for shingle in grams[-1]:
            index[shingle].add(number)
    pairs = set()
    for numbers in index.values():
        if len(numbers) <= 30:  # a phrase on 30 pages is a phrase, not a repeated fact
            pairs.update(pair for pair in combinations(sorted(numbers), 2) if found[pair[0]].page != found[pair[1]].page)
    result = []
    for a, b in sorted(pairs):
        shared = len(grams[a] & grams[b]) / min(len(grams[a]), len(grams[b]))
        if shared >= OVERLAP and found[a].page not in found[b].links and found[b].page not in found[a].links:
            result.append((found[a], found[b]))
    return result


def edges_by_page(pages) -> dict[str, set[str]]:
    return {str(page.path.relative_to(DOCS_DIR)): range_edges(page) for page in pages}


def omitting_claims(page) -> set[str]:
    return {claim_id for claim_id, claim in page_claims(page).items() if getattr(claim, "omits", ())}


def omitting_by_page(pages) -> dict[str, set[str]]:
    return {str(page.path.relative_to(DOCS_DIR)): omitting_claims(page) for page in pages}


def findings() -> dict[str, list[str]]:
    """kind -> sorted finding keys ('page: first words'), each with its line for the reader."""
    pages = question_pages(load_pages())
    every, out = [], {"version": [], "default": [], "repeat": []}
    linked_edges, linked_omitting = edges_by_page(pages), omitting_by_page(pages)
    for page in pages:
        found = sentences(page.path)
        every += found
        out["version"] += [f"{s.page}: {s.key}" for s in version_findings(page, found, linked_edges=linked_edges)]
        defaults = default_findings(page, found, omitting_claims(page), linked_omitting)
        out["default"] += [f"{s.page}: {s.key}" for s in defaults]
    deliberate = {(entry["pages"][0], entry["pages"][1], entry["starts"]) for entry in read_yaml(DELIBERATE) or []}
    for a, b in repeated(every):
        if (a.page, b.page, a.key) not in deliberate:
            out["repeat"].append(f"{a.page} ~ {b.page}: {a.key}")
    return {kind: sorted(set(keys)) for kind, keys in out.items()}


def read_yaml(path: Path):
    return yaml.safe_load(path.read_text()) if path.exists() else None


def located(kind: str) -> list[str]:
    """The findings of one kind with their lines, for a person to open."""
    pages = question_pages(load_pages())
    linked_edges, linked_omitting = edges_by_page(pages), omitting_by_page(pages)
    lines = []
    for page in pages:
        found = sentences(page.path)
        if kind == "version":
            chosen = version_findings(page, found, linked_edges=linked_edges)
        else:
            chosen = default_findings(page, found, omitting_claims(page), linked_omitting)
        lines += [f"{s.page}:{s.line}: {s.text[:160]}" for s in chosen]
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backlog", action="store_true", help="write today's findings as the backlog")
    args = parser.parse_args(argv)
    found = findings()
    if args.backlog:
        BACKLOG.write_text(
            "# Prose findings known and not yet fixed (verify/website/prose.py); this list may only shrink.\n"
            + yaml.safe_dump(found, allow_unicode=True, width=200, sort_keys=True)
        )
    for kind in ("version", "default"):
        lines = located(kind)
        print(f"{kind} statements without their backing: {len(lines)}")
        for line in lines:
            print(f"  {line}")
    print(f"repeated sentences across pages: {len(found['repeat'])}")
    for line in found["repeat"]:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
