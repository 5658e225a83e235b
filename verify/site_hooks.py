"""mkdocs hooks: put each proof's code and latest evidence on its page, and build the errata table.

A page marks where a proof goes with `<!-- proof: NAME.py -->`; the errata page with `<!-- errata -->`.
The question ledger (verify/ledger.py): `<!-- question-ledger -->`.
Study mode (verify/study.py, verify/figures.py): `<!-- question-index -->`, `<!-- cheat-sheet -->`,
`<!-- figure: ID -->`, and the generated assets/study/questions.json and assets/figures/*.svg.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.exceptions import PluginError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # mkdocs loads hooks by path

from verify import evidence, figures, lab_pages, ledger, study  # noqa: E402
from verify.pages import DIFFICULTIES, DOCS_DIR, QUESTIONS, SNIPPETS_DIR, find_snippet, load_page, load_pages  # noqa: E402

SOURCES = {
    "interview-handout": "Interview handout (《Accelerate分布式训练面试题》)",
    "course-slides": "Course slides (使用 AutoModel 和 Accelerator 准备模型)",
    "summary-article": "Summary article (《圖解分布式訓練（七）》)",
}


def indent(text: str, spaces: int = 4) -> str:
    return "\n".join((" " * spaces + line) if line else "" for line in text.splitlines())


def show(value) -> str:
    if isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, list):
        text = "[" + ", ".join(show(item) for item in value) + "]"
    else:
        text = str(value)
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`"


def verdict_text(claim: dict, declared) -> str:
    if claim.get("expected_here", True):
        return "pass" if claim["passed"] else "FAIL"
    span = f"{declared.since or 'any'} to {declared.until or 'now'}" if declared else "its releases"
    return f"HOLDS outside its releases ({span})" if claim["passed"] else f"does not hold here, as declared ({span})"


def evidence_block(snippet: str, slug: str, declared: dict) -> str:
    found = evidence.read(snippet)
    rerun = indent(f"Run the proof, then rebuild the site:\n\n```bash\npython -m pytest verify -k {slug}\n```")
    claims = "\n\n" + indent("\n".join(f"- {anchor(claim)}**{claim}**: {declared[claim].says}" for claim in declared))
    if not found:
        return '!!! info "No evidence from this machine yet"\n' + rerun + claims
    if not evidence.matches_claims(found, declared):
        return '!!! warning "The evidence on this machine predates the claims this page now makes"\n' + rerun + claims
    passed = all(evidence.as_declared(claim) for claim in found["claims"])
    versions = ", ".join(f"{name} {version}" for name, version in found["versions"].items() if version)
    rows = ["| claim | rank | measured | expected | negative control: what it removes, its value | verdict |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for claim in found["claims"]:
        # Ranks that measured the same thing share a row.
        rows_by_value: dict = {}
        for report in claim["reports"] or [{}]:
            key = tuple(show(report.get(k)) for k in ("measured", "op", "bound", "control"))
            rows_by_value.setdefault(key, []).append(str(report.get("rank", "—")))
        removes = declared[claim["id"]].control if claim["id"] in declared else None
        for (measured, op, bound, control), ranks in rows_by_value.items():
            expected = f"{op.strip('`')} {bound}" if claim["reports"] else "—"
            control = f"{removes.replace('|', '/')}: {control}" if removes else control
            rows.append(
                f"| `{claim['id']}` | {', '.join(ranks)} | {measured} | {expected} "
                f"| {control} | {verdict_text(claim, declared.get(claim['id']))} |"
            )
    details = []
    for claim in found["claims"]:
        details.append(f"- {anchor(claim['id'])}**{claim['id']}**: {claim['statement']}")
        first = claim["reports"][0] if claim["reports"] else {}
        if first.get("details"):
            measured = ", ".join(f"{key} = {show(value)}" for key, value in first["details"].items())
            details.append(f"    <br>rank {first['rank']} also measured: {measured}")
    failures = [f"{c['id']}: {c['reason']}" for c in found["claims"] if not evidence.as_declared(c)]
    seconds = found.get("snippet_seconds")
    timing = f"snippet time {seconds:.2f} s" if seconds is not None else f"the snippet {found['status']}"
    body = "\n".join(
        [
            f"Latest `pytest verify` run on this machine, {found['date']}: **{found['world_size']} processes**, "
            f"backend **{found['backend']}**, {found['distributed_type']}, devices "
            f"{', '.join(sorted(set(map(str, found['device_per_rank'].values()))))}; "
            f"{versions}; {timing}.",
            "",
            *rows,
            "",
            *details,
            *(["", "Why it failed:", "", "```text", *failures, "```"] if failures else []),
        ]
    )
    kind = "success" if passed else "failure"
    title = "Evidence: every claim held" if passed else "Evidence: a claim FAILED on this machine"
    return f'!!! {kind} "{title}"\n{indent(body)}'


def anchor(claim_id: str) -> str:
    """Where the cheat sheet's links to a claim land."""
    return f'<span id="{study.claim_anchor(claim_id)}"></span>'


def releases_block(snippet: str, declared: dict) -> str:
    """A row per Accelerate release the matrix ran: each claim's outcome, checked against its range."""
    releases = evidence.across_releases(Path(snippet).name)
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
            mark = {"agrees": " (as declared)", "shown": ""}.get(row["verdict"], f" **MISMATCH: {row['verdict']}**")
            cells.append(row["outcome"] + mark)
        rows.append(f"| {release} | " + " | ".join(cells) + " |")
    ranges = [f"`{c}` {declared[c].since or 'any'} to {declared[c].until or 'now'}" for c in claims
              if declared[c].since or declared[c].until]  # fmt: skip
    note = ("Declared release ranges: " + "; ".join(ranges) + ".") if ranges else "No claim here declares a release range."
    body = "\n".join(["`python -m verify.matrix` ran this proof with the same torch on each release below. " + note,
                      "", *rows])  # fmt: skip
    return f'??? abstract "Across Accelerate releases ({len(releases)} run)"\n{indent(body)}'


def proof_block(snippet: str, slug: str, declared: dict) -> str:
    path = find_snippet(snippet)
    if not path.exists():
        raise PluginError(f"page {slug} names a snippet that does not exist: {path}")
    code = path.read_text(encoding="utf-8")
    snippet = path.relative_to(SNIPPETS_DIR).as_posix()  # shown with its topic folder
    run = (
        "```bash\n# on a machine without GPUs; with 2 GPUs leave ACCELERATE_USE_CPU out\n"
        f"ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/{snippet}\n```"
    )
    code_block = f'```python title="snippets/{snippet}"\n{code}\n```'
    return "\n\n".join(
        [f'???+ example "The proof: `snippets/{snippet}`"\n{indent(code_block)}\n\n{indent(run)}', evidence_block(snippet, slug, declared),
         releases_block(snippet, declared)]
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
    return config


def topic_listing(folder: Path) -> str:
    """A topic's index page lists its questions with their difficulty."""
    pages = sorted(
        (load_page(path) for path in folder.glob("*.md") if path.name != "index.md"),
        key=lambda page: (DIFFICULTIES.index(page.difficulty) if page.difficulty in DIFFICULTIES else 9, page.title),
    )
    return "\n".join(f"- [{page.title}]({page.path.name}) — {page.difficulty or 'unrated'}" for page in pages)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if lab_pages.lab_name(page.file):  # a notebook: mkdocs-jupyter renders it, lab_pages adds its evidence
        return markdown
    source = Path(page.file.abs_src_path)
    if "<!-- question-index -->" in markdown:
        markdown = markdown.replace("<!-- question-index -->", study.question_table(config["nav"] or [], source))
    if "<!-- cheat-sheet -->" in markdown:
        markdown = markdown.replace("<!-- cheat-sheet -->", study.cheat_sheet(config["nav"] or [], source))
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
    for proof in meta_page.proofs:
        marker = f"<!-- proof: {proof.snippet} -->"
        if marker not in markdown:
            raise PluginError(f"{source}: declares proof {proof.snippet} but has no '{marker}' line")
        markdown = markdown.replace(marker, proof_block(proof.snippet, meta_page.slug, proof.claims))
    if figures.unused_markers(markdown, meta_page):
        raise PluginError(f"{source}: places a figure it does not declare: {figures.unused_markers(markdown, meta_page)}")
    return figures.place(markdown, meta_page, lambda path: files.get_file_from_path(path) is not None)


def on_files(files, config):
    """Study mode's generated files (the mock interview's questions, the figures); labs from their executed copies."""
    try:
        return study.add_generated_files(lab_pages.use_executed_copies(files), config)
    except figures.FigureError as error:
        raise PluginError(str(error)) from None


def on_page_content(html_text, page, config, files):
    return lab_pages.lab_page_content(html_text, page, config, evidence_block)


def on_post_page(output, page, config):
    return lab_pages.self_contained(output, page, config)
