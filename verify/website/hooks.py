"""mkdocs hooks: put each proof's code and latest evidence on its page, and build the errata table.

A page marks where a proof goes with `<!-- proof: NAME.py -->`; the errata page with `<!-- errata -->`.
The question ledger (verify/website/ledger.py): `<!-- question-ledger -->`.
Study mode (verify/website/study.py, verify/website/figures.py): `<!-- question-index -->`, `<!-- week-plan -->`,
`<!-- cheat-sheet -->`,
`<!-- figure: ID -->`, and the generated assets/study/questions.json and assets/figures/*.svg.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from mkdocs import plugins
from mkdocs.exceptions import PluginError

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # mkdocs loads hooks by path: the checkout first

from verify import evidence, levels, sources
from verify.website import downloads, evidence_box, figures, folds, lab_pages, ledger, render_cache, search_exclude, study  # noqa: E402
from verify.website import levels as level_labels  # noqa: E402
from verify.pages import QUESTIONS, REPO_URL, all_proofs, find_snippet, load_page, load_pages  # noqa: E402
from verify.paths import DOCS_DIR, SNIPPETS_DIR
from verify.pages import DIFFICULTIES  # noqa: E402

SOURCES = {
    "interview-handout": "Interview handout (《Accelerate分布式训练面试题》)",
    "course-slides": "Course slides (使用 AutoModel 和 Accelerator 准备模型)",
    "summary-article": "Summary article (《圖解分布式訓練（七）》)",
}


def indent(text: str, spaces: int = 4) -> str:
    return "\n".join((" " * spaces + line) if line else "" for line in text.splitlines())


def evidence_block(proof, slug: str) -> str:
    """The evidence box of a proof (verify/website/evidence_box.py)."""
    return evidence_box.box(proof, slug)


def anchor(claim_id: str) -> str:
    """Where the cheat sheet's links to a claim land."""
    return f'<span id="{evidence_box.esc(study.claim_anchor(claim_id))}"></span>'


def releases_block(proof) -> str:
    """A row per Accelerate release the matrix ran: each claim's outcome, checked against its range."""
    releases = evidence.across_releases(proof)
    declared = proof.claims
    if not releases:
        return ""
    claims = list(declared)
    header = "| release | " + " | ".join(f"`{claim}`" for claim in claims) + " |"
    rows = [header, "|---|" + "---|" * len(claims)]
    for release, found in releases.items():
        by_claim = {row["claim"]: row for row in found}
        cells = []
        for claim in claims:
            row = by_claim.get(claim)
            if row is None:
                cells.append("—")
                continue
            # the matrix's rows are evidence: text, never markup (md_text also keeps a '|' out of the table)
            verdict = row["verdict"]
            mark = {"agrees": " (as declared)", "shown": ""}.get(verdict, f" **MISMATCH: {evidence_box.md_text(verdict)}**")
            cells.append(evidence_box.md_text(row["outcome"]) + mark)
        rows.append(f"| {evidence_box.md_text(release)} | " + " | ".join(cells) + " |")
    ranges = [f"`{c}` {declared[c].since or 'any'} to {declared[c].until or 'now'}" for c in claims
              if declared[c].since or declared[c].until]  # fmt: skip
    note = ("Declared release ranges: " + "; ".join(ranges) + ".") if ranges else "No claim here declares a release range."
    body = "\n".join(["`python -m verify.matrix` ran this proof with the same torch on each release below. " + note,
                      "", *rows])  # fmt: skip
    return f'??? abstract "Across Accelerate releases ({len(releases)} run)"\n{indent(body)}'


def proof_block(proof, slug: str, page_path: Path) -> str:
    path = find_snippet(proof.snippet)
    if not path.exists():
        raise PluginError(f"page {slug} names a snippet that does not exist: {path}")
    code = path.read_text(encoding="utf-8")
    snippet = path.relative_to(SNIPPETS_DIR).as_posix()  # shown with its topic folder
    up = "../" * (len(page_path.relative_to(DOCS_DIR).parts) - 1)
    script = downloads.script_path(proof.snippet)
    run = (
        f"**Run it yourself:** [download `{path.name}`]({up}{script}){{ download=\"{path.name}\" .proof-download }}, "
        f"one file with the `_claims.py` it imports inlined (or take [`_claims.py`]({up}{downloads.DOWNLOADS}/_claims.py)"
        f"{{ download=\"_claims.py\" }} and put it beside the snippet), then on a machine without GPUs:\n\n"
        f"```bash\n{downloads.INSTALL}\n{downloads.RUN.format(name=path.name)}\n```\n\n"
        "Each rank prints PASS or FAIL for each claim. With two GPUs, leave `ACCELERATE_USE_CPU` out. "
        f"From a clone of the [repository]({REPO_URL}), the harness judges it: `python -m pytest verify -k {slug}`."
    )
    code_block = f'```python title="snippets/{snippet}"\n{code}\n```'
    # The code stays out of the search index (it was half of it): search finds the prose, which links here.
    code = f'??? example "The proof\'s code: `snippets/{snippet}`"\n{indent(code_block)}'
    return "\n\n".join(
        [f'<div data-search-exclude="code" markdown="1">\n\n{code}\n\n</div>',
         # the same instructions on every page: one hit per page for "download" or "pip install" helps nobody
         f'<div data-search-exclude="run" markdown="1">\n\n{run}\n\n</div>',
         evidence_block(proof, slug), releases_block(proof)]
    )


def nav_pages(nav: list) -> list[str]:
    """Every page path in the navigation, in reading order."""
    found = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        found += nav_pages(value) if isinstance(value, list) else [value]
    return found


def errata_table(nav: list) -> str:
    """One table per handout, its errors in the site's reading order."""
    order = {path: index for index, path in enumerate(nav_pages(nav))}
    pages = sorted(load_pages(DOCS_DIR), key=lambda page: order.get(page.path.relative_to(DOCS_DIR).as_posix(), 999))
    sections, number = [], 0
    for source, source_title in SOURCES.items():
        rows = ["| # | what it says | what is true | refuted on |", "|---|---|---|---|"]
        for page in pages:
            for error in page.handout_errors:
                if error["source"] != source:
                    continue
                number += 1
                link = f"[{page.title}]({page.path.relative_to(DOCS_DIR).as_posix()}#{error['id']})"
                rows.append(f"| {number} | {error['quote']} | {error['correction']} | {link} |")
        if len(rows) > 2:
            sections.append(f"## {source_title}\n\n" + "\n".join(rows))
    return "\n\n".join(sections)


def topic_sections(docs_dir: Path = DOCS_DIR) -> list[dict]:
    """One navigation section per topic folder, ordered by its index page's `order`, questions by difficulty.

    A topic is a folder docs/questions/<topic>/ with an index.md (title, order); a new question is a
    page dropped into one, with no navigation to edit.
    """
    sections = []
    for folder in sorted(p for p in (docs_dir / QUESTIONS).iterdir() if p.is_dir()):
        index = load_page(folder / "index.md")
        pages = [load_page(path) for path in folder.glob("*.md") if path.name != "index.md"]
        rank = {level: number for number, level in enumerate(DIFFICULTIES)}
        pages.sort(key=lambda page: (rank.get(page.difficulty, len(rank)), page.title))
        items = [index.path.relative_to(docs_dir).as_posix()] + [p.path.relative_to(docs_dir).as_posix() for p in pages]
        sections.append((index.meta.get("order", 99), index.title, {index.title: items}))
    return [section for _, _, section in sorted(sections, key=lambda s: (s[0], s[1]))]


def expand_nav(nav: list) -> list:
    """mkdocs.yml lists `questions/` once; it becomes the topic sections."""
    expanded = []
    for entry in nav:
        expanded += topic_sections() if entry == QUESTIONS + "/" else [entry]
    return expanded


def on_config(config):
    config["nav"] = expand_nav(config["nav"] or [])
    render_cache.install()  # a page whose Markdown and links did not change is not converted again
    return config


def topic_listing(folder: Path) -> str:
    """A topic's index page lists its questions with their difficulty."""
    pages = sorted(
        (load_page(path) for path in folder.glob("*.md") if path.name != "index.md"),
        key=lambda page: (DIFFICULTIES.index(page.difficulty) if page.difficulty in DIFFICULTIES else 9, page.title),
    )
    listing = "\n".join(f"- [{page.title}]({page.path.name}) — {page.difficulty or 'unrated'}" for page in pages)
    drill = (f'<a class="md-button" id="drill-topic" href="../../mock-interview/#topic={evidence_box.esc(folder.name)}">'
             "A mock interview on this topic only</a>")  # fmt: skip
    return f"{listing}\n\n{drill}"


def evidence_labels(markdown: str, page) -> str:
    """The page's evidence levels rendered (verify/website/levels.py); a wrong label fails the build."""
    problems = levels.problems(page)
    if problems:
        raise PluginError("\n".join(problems))
    try:
        return level_labels.place(markdown, page)
    except sources.SourceError as error:
        raise PluginError(f"{page.path}: {error}") from None


def on_page_markdown(markdown: str, page, config, files) -> str:
    if lab_pages.lab_name(page.file):  # a notebook: mkdocs-jupyter renders it, lab_pages adds its evidence
        return markdown
    source = Path(page.file.abs_src_path)
    if "<!-- question-index -->" in markdown:
        markdown = markdown.replace("<!-- question-index -->", study.question_table(config["nav"] or [], source))
    if "<!-- week-plan -->" in markdown:
        markdown = markdown.replace("<!-- week-plan -->", study.week_plan(config["nav"] or [], source))
    if "<!-- cheat-sheet -->" in markdown:
        markdown = markdown.replace("<!-- cheat-sheet -->", study.cheat_sheet(config["nav"] or [], source))
    if "<!-- cheat-sheet-compact -->" in markdown:
        markdown = markdown.replace("<!-- cheat-sheet-compact -->", study.cheat_sheet_compact(config["nav"] or []))
    if "<!-- errata -->" in markdown:
        markdown = markdown.replace("<!-- errata -->", errata_table(config["nav"] or []))
    if ledger.MARKER in markdown:
        try:
            markdown = markdown.replace(ledger.MARKER, ledger.render(source))
        except ValueError as error:
            raise PluginError(str(error)) from None
    if "<!-- topic-questions -->" in markdown:
        markdown = markdown.replace("<!-- topic-questions -->", topic_listing(source.parent))
    meta_page = load_page(source)
    if meta_page.error:
        raise PluginError(meta_page.error)
    markdown = evidence_labels(markdown, meta_page)
    for proof in meta_page.proofs:
        marker = f"<!-- proof: {proof.snippet} -->"
        if marker not in markdown:
            raise PluginError(f"{source}: declares proof {proof.snippet} but has no '{marker}' line")
        markdown = markdown.replace(marker, proof_block(proof, meta_page.slug, source))
    markdown = evidence_box.place_mutants(markdown, meta_page)
    if figures.unused_markers(markdown, meta_page):
        raise PluginError(f"{source}: places a figure it does not declare: {figures.unused_markers(markdown, meta_page)}")
    return figures.place(markdown, meta_page, lambda path: files.get_file_from_path(path) is not None)


def on_files(files, config):
    """Study mode's generated files (the mock interview's questions, the figures); labs from their executed copies."""
    from mkdocs.structure.files import File

    try:
        files = study.add_generated_files(lab_pages.use_executed_copies(files), config)
    except figures.FigureError as error:
        raise PluginError(str(error)) from None
    from verify import labs

    for path, content in downloads.all_files(all_proofs(load_pages(DOCS_DIR)), labs.LABS_DIR).items():
        files.append(File.generated(config, path, content=content))
    return files


ANSWER_DETAILS = re.compile(r'<details class="success">(\s*<summary>30-second answer</summary>)')


CHINESE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff《》〈〉「」『』【】（）：，。、；？！\u3000-\u303f]*[\u3400-\u9fff\uf900-\ufaff]"
                     r"[\u3400-\u9fff\uf900-\ufaff《》〈〉「」『』【】（）：，。、；？！\u3000-\u303f]*")
RAW_ELEMENTS = ("script", "style", "pre", "textarea")


HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


RAW_SPAN = re.compile(r"<(script|style|pre|textarea)(?=[\s>])[^>]*>.*?</\1\s*>", re.S | re.I)


def mark_chinese(html_text: str) -> str:
    """Chinese runs of text get lang="zh", so screen readers and fonts treat them as Chinese (not inside a
    tag, nor inside <script>, <style>, <pre> or <textarea>)."""
    if not HAN.search(html_text):  # most pages: nothing to mark
        return html_text
    raw = [span.span() for span in RAW_SPAN.finditer(html_text)]
    kept, position = [], 0
    for run in CHINESE.finditer(html_text):
        start = run.start()
        if html_text.rfind("<", 0, start) > html_text.rfind(">", 0, start) or any(a <= start < b for a, b in raw):
            continue
        kept += [html_text[position:start], f'<span lang="zh">{run.group(0)}</span>']
        position = run.end()
    return "".join(kept) + html_text[position:]


def on_page_content(html_text, page, config, files):
    # The 30-second answer stays out of the search index, so search previews cannot give it away.
    html_text = ANSWER_DETAILS.sub(r'<details class="success" data-search-exclude>\1', html_text)
    html_text = folds.hide_folded(html_text)  # and every other folded block's body: the follow-up answers
    html_text = mark_chinese(html_text)
    return lab_pages.lab_page_content(html_text, page, config, evidence_block)


def on_post_page(output, page, config):
    return lab_pages.self_contained(output, page, config)


# The search plugin indexes a page in its on_page_context: it gets the page without what it would skip
# anyway (verify/website/search_exclude.py), and the page is whole again right after.
@plugins.event_priority(100)
def _before_search(context, page, config, nav):
    search_exclude.before_indexing(page)
    return context


@plugins.event_priority(-100)
def _after_search(context, page, config, nav):
    search_exclude.after_indexing(page)
    return context


on_page_context = plugins.CombinedEvent(_before_search, _after_search)
