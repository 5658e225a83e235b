"""mkdocs hooks: put each proof's code and latest evidence on its page, and build the errata table.

A page marks where a proof goes with `<!-- proof: NAME.py -->`; the errata page with `<!-- errata -->`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.exceptions import PluginError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # mkdocs loads hooks by path

from verify import evidence  # noqa: E402
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


def evidence_block(snippet: str, slug: str, declared: dict) -> str:
    found = evidence.read(snippet)
    rerun = indent(f"Run the proof, then rebuild the site:\n\n```bash\npython -m pytest verify -k {slug}\n```")
    if not found:
        return '!!! info "No evidence from this machine yet"\n' + rerun
    if {claim["id"] for claim in found["claims"]} != set(declared) or any(
        claim.get("statement") != declared[claim["id"]].says for claim in found["claims"]
    ):
        return '!!! warning "The evidence on this machine predates the claims this page now makes"\n' + rerun
    passed = all(claim["passed"] for claim in found["claims"])
    versions = ", ".join(f"{name} {version}" for name, version in found["versions"].items() if version)
    rows = ["| claim | rank | measured | expected | negative control | verdict |", "|---|---|---|---|---|---|"]
    for claim in found["claims"]:
        # Ranks that measured the same thing share a row.
        rows_by_value: dict = {}
        for report in claim["reports"] or [{}]:
            key = tuple(show(report.get(k)) for k in ("measured", "op", "bound", "control"))
            rows_by_value.setdefault(key, []).append(str(report.get("rank", "—")))
        for (measured, op, bound, control), ranks in rows_by_value.items():
            expected = f"{op.strip('`')} {bound}" if claim["reports"] else "—"
            rows.append(
                f"| `{claim['id']}` | {', '.join(ranks)} | {measured} | {expected} "
                f"| {control} | {'pass' if claim['passed'] else 'FAIL'} |"
            )
    details = []
    for claim in found["claims"]:
        details.append(f"- **{claim['id']}**: {claim['statement']}")
        if declared[claim["id"]].control:
            details.append(f"    <br>*The control removes:* {declared[claim['id']].control}")
        first = claim["reports"][0] if claim["reports"] else {}
        if first.get("details"):
            measured = ", ".join(f"{key} = {show(value)}" for key, value in first["details"].items())
            details.append(f"    <br>rank {first['rank']} also measured: {measured}")
    failures = [f"{c['id']}: {c['reason']}" for c in found["claims"] if not c["passed"]]
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
        [f'???+ example "The proof: `snippets/{snippet}`"\n{indent(code_block)}\n\n{indent(run)}', evidence_block(snippet, slug, declared)]
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


def question_index(nav: list) -> str:
    """The questions in the order and sections of the site's navigation."""
    lines = []
    for entry in nav:
        if not isinstance(entry, dict):
            continue
        ((section, items),) = entry.items()
        questions = [item for item in items if str(item).startswith(QUESTIONS + "/")] if isinstance(items, list) else []
        questions = [item for item in questions if not item.endswith("/index.md")]
        if not questions:
            continue
        lines += ["", f"### {section}", ""]
        for item in questions:
            page = load_page(DOCS_DIR / item)
            claims = sum(len(proof.claims) for proof in page.proofs)
            lines.append(f"- [{page.title}]({item}) — {claims} proven claim{'s' * (claims != 1)}")
    return "\n".join(lines)


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
    source = Path(page.file.abs_src_path)
    if "<!-- question-index -->" in markdown:
        markdown = markdown.replace("<!-- question-index -->", question_index(config["nav"] or []))
    if "<!-- errata -->" in markdown:
        markdown = markdown.replace("<!-- errata -->", errata_table(config["nav"] or []))
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
    return markdown


# --- Labs: docs/labs/*.py notebooks, rendered by mkdocs-jupyter ---------------------------------------
# The .py (jupytext percent format) is the source; `pytest verify` keeps the executed notebook in
# .verify/labs/. A lab page shows that executed copy when there is one, else the bare source and the
# command that runs it; then the evidence of its claims, as a question page does.

import json  # noqa: E402
import re as _re  # noqa: E402

import markdown as _markdown  # noqa: E402

from verify import labs as _labs  # noqa: E402

_NOTEBOOK_CSS = "assets/notebook.css"  # the ~590 KB of notebook styles, written once instead of per page
_EXTERNAL_SCRIPT = _re.compile(
    r"<script[^>]*\bsrc=(?:[\"']?(?:https?:)?//[^>]*|\"\")>\s*</script>"  # MathJax from a CDN, or src=""
    r"|<script type=\"text/x-mathjax-config\">.*?</script>"
    r"|<script type=\"module\">(?:(?!</script>).)*?(?:https?:)?//cdn(?:(?!</script>).)*</script>",  # Mermaid
    _re.S,
)
_STYLE = _re.compile(r"<style type=\"text/css\">(.*?)</style>", _re.S)


def _lab_name(file) -> str | None:
    uri = getattr(file, "src_uri", "") or ""
    return Path(uri).stem if uri.startswith("labs/") and uri.endswith(".py") else None


def on_files(files, config):
    """A lab with an executed copy from `pytest verify` is rendered from that copy."""
    for file in files:
        name = _lab_name(file)
        executed = _labs.EXECUTED_DIR / f"{name}.ipynb" if name else None
        if executed is not None and executed.exists():
            # mkdocs-jupyter's NotebookFile wraps the File (`.file`); abs_src_path is a cached
            # property of each, so set it on both
            for layer in {id(file): file, id(getattr(file, "file", file)): getattr(file, "file", file)}.values():
                layer.abs_src_path = str(executed)
    return files


def _lab_banner(name: str) -> str:
    executed = _labs.EXECUTED_DIR / f"{name}.ipynb"
    source = f"docs/labs/{name}.py"
    how = (f"Open it in Jupyter with jupytext (`jupyter lab`, then *Open With → Notebook* on `{source}`), "
           f"or run and judge it: `python -m pytest verify -k {name}`.")  # fmt: skip
    if executed.exists():
        run = json.loads(executed.read_text()).get("metadata", {}).get("verify", {})
        title = "Outputs of the latest `pytest verify` run on this machine"
        body = (f"Executed {run.get('date', '?')} in {run.get('seconds', '?')} s, status **{run.get('status', '?')}**. "
                f"Source: `{source}`. {how}")  # fmt: skip
        return f'!!! info "{title}"\n    {body}'
    return f'!!! info "Not run on this machine yet: the source without outputs"\n    {how}'


def on_page_content(html_text, page, config, files):
    name = _lab_name(page.file)
    if not name:
        return html_text
    proof = _labs.read_lab(_labs.LABS_DIR / f"{name}.py")
    text = _lab_banner(name) + "\n\n## Claims and evidence\n\n" + evidence_block(proof.snippet, name, proof.claims)
    rendered = _markdown.markdown(text, extensions=config["markdown_extensions"], extension_configs=config["mdx_configs"])
    head, _, tail = rendered.partition("<h2")
    return head + html_text + ("<h2" + tail if tail else "")


def on_post_page(output, page, config):
    if not _lab_name(page.file):
        return output
    output = _EXTERNAL_SCRIPT.sub("", output)  # nothing on a lab page is requested from another host
    styles = _STYLE.findall(output)
    if styles:
        css_path = Path(config["site_dir"]) / _NOTEBOOK_CSS
        css_path.parent.mkdir(parents=True, exist_ok=True)
        css_path.write_text("\n".join(styles))  # the same for every lab
        output = _STYLE.sub("", output)
        link = f'<link rel="stylesheet" href="{"../" * page.url.count("/")}{_NOTEBOOK_CSS}">'
        output = output.replace("</head>", link + "\n</head>", 1)
    return output
