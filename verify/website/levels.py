"""Evidence levels on the site (data/levels-spec.md), and `python -m verify.website.levels`, the report.

- `place(markdown, page)`: each `<!-- evidence: ... -->` marker becomes a line under its paragraph
  ("Evidence: sourced · NCCL User Guide (NCCL 2.21.5 docs)"), linked to the source's url, or to the claim's
  evidence row (`#claim-<id>`) or the page's list of checked quotes (`#source-<id>`); the line under the
  title gives the page's mix in words; the checked quotes are listed under `## Sources`.
- the home page: `site_summary` (the counts per level over the site), and per question row its mix
  (`mix_cell`) and the levels it has (`row_levels`, which the table's filter reads).

A GPU-ready claim whose proof has current evidence was run on a GPU (a `requires: cuda` proof is
skipped anywhere else); without it, the site says "not yet run on a GPU".
"""

from __future__ import annotations

import functools
import html
import importlib.metadata
import re
import sys
from collections import Counter

from verify import evidence, levels, sources
from verify.pages import Page, load_pages, question_pages

# The words a count is shown with, in this order; "gpu-ran" is a GPU-ready claim that has GPU evidence.
WORDS = (
    ("measured", "measured"),
    ("modelled", "modelled"),
    ("sourced", "sourced"),
    ("gpu-ready", "GPU-ready, not yet run on a GPU"),
    ("gpu-ran", "GPU-ready, run on a GPU"),
)
SHORT = {"measured": "measured", "modelled": "modelled", "sourced": "sourced", "gpu-ready": "GPU-ready"}


def esc(value) -> str:
    return html.escape(str(value), quote=True)


def source_anchor(source_id: str) -> str:
    return f"source-{source_id}"


def claim_anchor(claim_id: str) -> str:
    return f"claim-{claim_id}"


def ran_on_gpu(page: Page) -> set[str]:
    """The GPU-ready claims of the page that have current evidence (only a GPU can have made it)."""
    return {claim_id for proof in page.proofs if proof.requires == "cuda"
            and evidence.current(proof) for claim_id in proof.claims}  # fmt: skip


def mix(page: Page) -> Counter:
    """Claims and checked quotes per level, the GPU-ready ones split by whether a GPU has run them."""
    counts = levels.evidence_mix(page)
    ran = len(ran_on_gpu(page))
    if ran:
        counts["gpu-ready"] -= ran
        counts["gpu-ran"] += ran
    return +counts


def in_words(counts: Counter, separator: str = " · ") -> str:
    """'4 measured · 1 modelled · 6 sourced · 2 GPU-ready, not yet run on a GPU'."""
    return separator.join(f"{counts[key]} {words}" for key, words in WORDS if counts.get(key))


def installed_version(relative: str) -> str:
    """'torch 2.13.0' for an installed file's package (its distribution's name and version)."""
    return package_version(relative.split("/")[0].removesuffix(".py"))


@functools.lru_cache(maxsize=None)
def package_version(top: str) -> str:
    # packages_distributions() reads every installed distribution's file list (about 0.1 s): once per build
    names = distributions_of().get(top) or [top]
    try:
        return f"{names[0]} {importlib.metadata.version(names[0])}"
    except importlib.metadata.PackageNotFoundError:
        return top


@functools.lru_cache(maxsize=1)
def distributions_of() -> dict:
    return importlib.metadata.packages_distributions()


def source_label(source_id: str, entry: dict) -> tuple[str, str]:
    """(words, link) naming where a checked quote is: the excerpt's title and version, or the installed file."""
    kind, target = sources.kind_and_target(entry["in"])
    if kind == "excerpt":
        excerpt = sources.load_excerpt(target)
        at = re.sub(r"\b([0-9a-f]{10})[0-9a-f]{30}\b", r"\1", excerpt.meta.at)  # a commit, shortened (the url has it whole)
        return f"{excerpt.meta.title} ({at})", excerpt.meta.url
    return f"{target} ({installed_version(target)}, installed)", f"#{source_anchor(source_id)}"


def evidence_line(marker: levels.Marker, page: Page) -> str:
    """The small line under a labelled paragraph: each level once, then what backs it. Several quotes
    from one file name it once, then link each quote ('accelerate/state.py (...) quotes 1, 2, 3')."""
    groups: dict = {}  # level -> [target html], in the marker's order
    quoted: dict = {}  # source label -> (link, [source ids])
    for level, name in marker.pairs:
        if level == "sourced":
            words, link = source_label(name, page.sources[name])
            if words not in quoted:
                groups.setdefault(level, []).append(words)
            quoted.setdefault(words, (link, []))[1].append(name)
            continue
        says = next(proof.claims[name].says for proof in page.proofs if name in proof.claims)
        target = f'<a href="#{esc(claim_anchor(name))}" title="{esc(says)}"><code>{esc(name)}</code></a>'
        if level == "gpu-ready" and name not in ran_on_gpu(page):
            target += " (not yet run on a GPU)"
        groups.setdefault(level, []).append(target)
    parts = []
    for level, targets in groups.items():
        if level == "sourced":
            targets = [source_links(words, *quoted[words], page) for words in targets]
        tag = f'<span class="ev-level ev-level--{esc(level)}">{esc(SHORT[level])}</span>'
        parts.append(f"{tag} · {', '.join(targets)}")
    return f'<p class="ev-line" data-search-exclude>Evidence: {"; ".join(parts)}</p>'


def source_links(words: str, link: str, names: list, page: Page) -> str:
    def quote_title(name):
        return esc(sources.normalised(page.sources[name]["quote"]))

    if len(names) == 1:
        return f'<a href="{esc(link)}" title="{quote_title(names[0])}">{esc(words)}</a>'
    numbered = ", ".join(f'<a href="#{esc(source_anchor(name))}" title="{quote_title(name)}">{number}</a>'
                         for number, name in enumerate(names, start=1))  # fmt: skip
    return f'<a href="{esc(link)}">{esc(words)}</a> (quotes {numbered})'


def header_line(page: Page) -> str:
    counts = mix(page)
    if not counts:
        return ""
    return (f'<p class="ev-mix">Evidence on this page: {esc(in_words(counts))} '
            '<a href="#checked-quotes" class="ev-mix-link">(checked quotes below)</a></p>'
            if counts.get("sourced") else f'<p class="ev-mix">Evidence on this page: {esc(in_words(counts))}</p>')  # fmt: skip


def checked_quotes(page: Page) -> str:
    """Every checked quote of the page, with where it is and what it backs (the `#source-<id>` anchors)."""
    items = []
    for source_id, entry in page.sources.items():
        kind, target = sources.kind_and_target(entry["in"])
        if kind == "installed":
            where = f"<code>{esc(target)}</code>, {esc(installed_version(target))} as installed"
        else:
            words, link = source_label(source_id, entry)
            where = f'<a href="{esc(link)}">{esc(words)}</a>'
        items.append(f'<li id="{esc(source_anchor(source_id))}"><q>{esc(sources.normalised(entry["quote"]))}</q> '
                     f'({where}). It backs: {esc(entry["backs"])} <span class="ev-id">source '
                     f"<code>{esc(source_id)}</code></span></li>")  # fmt: skip
    # search leaves the quotes and the evidence lines out: source lines are no answer, and they doubled the index
    return (f'<div class="ev-quotes" id="checked-quotes" markdown="0" data-search-exclude><p class="ev-heading">Checked quotes: '
            f"<code>python -m pytest verify -k {esc(page.slug)}</code> finds each one, word for word (whitespace "
            "normalised), in the installed file or the dated excerpt it names.</p>"
            f'<ul>{"".join(items)}</ul></div>')  # fmt: skip


def place(markdown: str, page: Page) -> str:
    """The page's Markdown with its evidence labels rendered (front matter already removed by mkdocs)."""
    lines, fenced, placed_header = [], False, False
    for line in markdown.splitlines():
        if levels.FENCE.match(line):
            fenced = not fenced
        found = None if fenced else levels.MARKER.match(line)
        if found:
            marker = levels.parse_marker(found["body"], 0)
            indent = line[: len(line) - len(line.lstrip())]
            lines += ["", indent + evidence_line(marker, page), ""]
            continue
        lines.append(line)
        if not fenced and not placed_header and line.startswith("# "):
            placed_header = True
            header = header_line(page)
            if header:
                lines += ["", header]
        elif not fenced and page.sources and line.rstrip() == "## Sources":
            lines += ["", checked_quotes(page)]
    text = "\n".join(lines) + ("\n" if markdown.endswith("\n") else "")
    if page.sources and "## Sources" not in markdown:
        text += "\n\n## Sources\n\n" + checked_quotes(page) + "\n"
    return text


# --- the home page ------------------------------------------------------------------------------


def row_levels(page: Page) -> str:
    """The levels a page has, as the home table's filter reads them: 'measured sourced gpu-ready'."""
    return " ".join(level for level in levels.LEVELS if levels.evidence_mix(page).get(level))


def mix_cell(page: Page) -> str:
    counts = mix(page)
    short = {**dict(WORDS), "gpu-ready": "GPU-ready (not yet run)", "gpu-ran": "GPU-ready (run on a GPU)"}
    return ", ".join(f"{counts[key]} {short[key]}" for key, _ in WORDS if counts.get(key)) or "none"


def level_options() -> str:
    return "".join(f'<option value="{level}">{esc(SHORT[level])}</option>' for level in levels.LEVELS)


def site_counts(pages: list[Page]) -> tuple[Counter, int, int]:
    """(claims and quotes per level, Mechanism paragraphs labelled, Mechanism paragraphs in all) over the pages."""
    total, labelled, blocks = Counter(), 0, 0
    for page in pages:
        total += mix(page)
        found = [block for block in levels.mechanism_blocks(*levels.body_and_first_line(page.path))[0] if block.statement]
        blocks += len(found)
        labelled += sum(block.marker is not None for block in found)
    return total, labelled, blocks


def site_summary(pages: list[Page]) -> str:
    counts, labelled, blocks = site_counts(pages)
    return (f'<p class="ev-site">Evidence across the site: {esc(in_words(counts))}. '
            f"{labelled} of {blocks} Mechanism paragraphs name their evidence so far.</p>")  # fmt: skip


# --- the report ---------------------------------------------------------------------------------


def report(pages: list[Page]) -> str:
    pages = [page for page in question_pages(pages) if not page.error]
    counts, labelled, blocks = site_counts(pages)
    by_level: Counter = Counter()
    facts: Counter = Counter()
    for page in pages:
        for block in levels.mechanism_blocks(*levels.body_and_first_line(page.path))[0]:
            if block.marker:
                by_level.update({level for level, _ in block.marker.pairs})
        for fact in page.key_facts:
            named = fact.get("source")
            facts["claim" if fact.get("claim") else "checked source" if named in page.sources
                  else "unchecked source" if named else "nothing"] += 1  # fmt: skip
    lines = [
        f"{len(pages)} question pages.",
        f"Claims and checked quotes per level: {in_words(counts, ', ') or 'none'}.",
        f"Checked quotes: {counts.get('sourced', 0)}; GPU-ready claims: {counts.get('gpu-ready', 0) + counts.get('gpu-ran', 0)}.",
        f"Key facts backed by: {', '.join(f'{n} {kind}' for kind, n in facts.most_common())}.",
        f"Mechanism paragraphs: {labelled} of {blocks} labelled"
        + (f" ({', '.join(f'{by_level[level]} {level}' for level in levels.LEVELS if by_level[level])};"
           " a paragraph with two levels counts in both)" if by_level else "") + ".",
    ]  # fmt: skip
    backlog = set(levels.backlog())
    lines += ["", "Unlabelled Mechanism paragraphs per page (file line: first words):"]
    for page in pages:
        missing = levels.unlabelled(page)
        if missing:
            mark = "" if levels.page_key(page) in backlog else "  [NOT IN THE BACKLOG]"
            lines.append(f"  {levels.page_key(page)}: {len(missing)}{mark}")
            lines += [f"    {block.line}: {re.sub(r'[ ]+', ' ', block.lines[0])[:70]}" for block in missing]
    return "\n".join(lines)


def main() -> int:
    print(report(load_pages()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
