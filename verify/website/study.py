"""Study mode, built from the pages' front matter and the latest evidence.

- the home page's question table (`<!-- question-index -->`), filtered in the browser by
  docs/javascripts/study.js through its rows' data attributes;
- the mock interview's questions, written into the site as assets/study/questions.json;
- the cheat sheet (`<!-- cheat-sheet -->`): every page's key facts by topic, each linked to the claim
  that proves it (the anchor `claim-<id>` that the evidence box puts on each claim).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path, PurePosixPath

import markdown as python_markdown

from verify import evidence
from verify.pages import DIFFICULTIES, QUESTIONS, Page, load_page, load_pages
from verify.paths import DOCS_DIR
from verify.website import figures
from verify.website.evidence_box import md_text

QUESTIONS_JSON = "assets/study/questions.json"
ANSWER = re.compile(r'\?\?\? success "30-second answer"\n((?:    .*\n|\n)+)')
STATUSES = ("passed", "failed", "no evidence yet", "skipped (requires cuda)")


def claim_anchor(claim_id: str) -> str:
    """The id the evidence box gives a claim, so the cheat sheet can link to it."""
    return f"claim-{claim_id}"


def ordered_questions(nav: list) -> list[Page]:
    """The question pages in the order of the site's navigation (topic, then difficulty)."""
    paths = []

    def walk(entries):
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            if isinstance(value, list):
                walk(value)
            elif isinstance(value, str) and value.startswith(QUESTIONS + "/") and not value.endswith("index.md"):
                paths.append(value)

    walk(nav)
    return [page for page in (load_page(DOCS_DIR / path) for path in paths) if page.topic]


def topic_title(topic: str) -> str:
    index = DOCS_DIR / QUESTIONS / topic / "index.md"
    return load_page(index).title if index.exists() else topic


def proof_status(page: Page) -> tuple[str, str]:
    """(status, why) of a page's proofs from the latest evidence: one of STATUSES."""
    failed, missing, skipped, passed = [], [], [], []
    for proof in page.proofs:
        found = evidence.current(proof.snippet, proof.claims)
        if found is None:
            (skipped if proof.requires == "cuda" else missing).append(proof.snippet)
        elif found["claims"] and all(evidence.as_declared(claim) for claim in found["claims"]):
            passed.append(proof.snippet)
        else:
            failed.append(proof.snippet)
    if failed:
        return "failed", "failed: " + ", ".join(failed)
    if missing:
        return "no evidence yet", "no current evidence for " + ", ".join(missing)
    if skipped and not passed:
        return "skipped (requires cuda)", "needs a GPU: " + ", ".join(skipped)
    why = f"{len(passed)} of {len(page.proofs)} proofs passed"
    return "passed", why + (f"; skipped (requires cuda): {', '.join(skipped)}" if skipped else "")


def claim_count(page: Page) -> int:
    return sum(len(proof.claims) for proof in page.proofs)


def mutation_checked(page: Page) -> int:
    """Claims that name the mutants (library bugs) that must break them (`breaks_when` in front matter)."""
    return sum(bool(getattr(claim, "breaks_when", None)) for proof in page.proofs for claim in proof.claims.values())


def slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


# --- the home page's table ----------------------------------------------------------------------


def question_table(nav: list, from_page: Path) -> str:
    """An HTML table (md_in_html, so mkdocs checks and rewrites the links) with filters above it."""
    pages = ordered_questions(nav)
    topics = list(dict.fromkeys(page.topic for page in pages))
    options = "".join(f'<option value="{html.escape(t)}">{html.escape(topic_title(t))}</option>' for t in topics)
    unrated = ("unrated",) if any(page.difficulty not in DIFFICULTIES for page in pages) else ()
    levels = "".join(f'<option value="{level}">{level}</option>' for level in DIFFICULTIES + unrated)
    statuses = "".join(f'<option value="{slugify(s)}">{s}</option>' for s in STATUSES)
    rows = []
    for page in pages:
        link = PurePosixPath(page.path.relative_to(DOCS_DIR).as_posix())
        relative = Path(*([".."] * (len(from_page.relative_to(DOCS_DIR).parts) - 1)), link).as_posix()
        status, why = proof_status(page)
        difficulty = page.difficulty or "unrated"
        rows.append(
            f'<tr data-topic="{html.escape(page.topic)}" data-difficulty="{html.escape(difficulty)}" '
            f'data-status="{slugify(status)}" markdown="1">'
            f'<td markdown="span">[{escape_link_text(page.title)}]({relative})</td>'
            f"<td>{html.escape(topic_title(page.topic))}</td>"
            f'<td><span class="qi-level qi-level--{slugify(difficulty)}">{html.escape(difficulty)}</span></td>'
            f'<td class="qi-claims"{checked_title(page)}>{claim_count(page)}{checked_note(page)}</td>'
            f'<td><span class="qi-status qi-status--{slugify(status)}" title="{html.escape(why)}">{status}</span></td>'
            f'<td class="qi-history" data-question="{html.escape(page.slug)}">not yet</td>'
            "</tr>"
        )
    return "\n".join(
        [
            '<div class="qi-filters">',
            f'<label>Topic <select id="qi-topic"><option value="">all topics</option>{options}</select></label>',
            f'<label>Difficulty <select id="qi-difficulty"><option value="">any</option>{levels}</select></label>',
            f'<label>Proof <select id="qi-status"><option value="">any</option>{statuses}</select></label>',
            f'<span id="qi-count" aria-live="polite">{len(pages)} questions</span>',
            "</div>",
            "",
            '<div class="qi-scroll" markdown="1">',
            '<table class="qi-table" id="question-index" markdown="1">',
            '<thead markdown="1"><tr markdown="1"><th>Question</th><th>Topic</th><th>Difficulty</th>'
            '<th class="qi-claims">Claims</th><th>Proof</th><th>Your record</th></tr></thead>',
            "<tbody markdown=\"1\">",
            *rows,
            "</tbody>",
            "</table>",
            "</div>",
            "",
            "*Proof* is the verdict of the latest `pytest verify` run on the machine that built this site: "
            "**passed** (every claim held), **failed**, **no evidence yet** (not run since the claims last "
            "changed), or **skipped (requires cuda)** (a proof that needs GPUs, on a machine without). "
            "*Your record* comes from your [mock interviews](mock-interview.md) in this browser: how often you "
            "were asked, your last grade, and when the question is due again.",
        ]
    )


def checked_note(page: Page) -> str:
    checked = mutation_checked(page)
    return f' <span class="qi-mutants">({checked} mutation-checked)</span>' if checked else ""


def checked_title(page: Page) -> str:
    checked = mutation_checked(page)
    return (f' title="{checked} of {claim_count(page)} claims were also run against library bugs made on purpose, '
            'and failed there as they must"') if checked else ""  # fmt: skip


def escape_link_text(text: str) -> str:
    return text.replace("[", "\\[").replace("]", "\\]")


# --- the mock interview's questions -------------------------------------------------------------


def answer_text(page: Page) -> str | None:
    """The page's 30-second answer, Markdown dedented (None when the page has none)."""
    found = ANSWER.search(page.path.read_text(encoding="utf-8"))
    if not found:
        return None
    return "\n".join(line[4:] for line in found.group(1).splitlines()).strip()


def answer_html(page: Page) -> str:
    """The 30-second answer as HTML. Relative links are dropped (their targets are site pages the
    mock interview links to anyway); links to other sites stay."""
    text = answer_text(page) or ""
    text = re.sub(r"\[([^\]]+)\]\((?!https?://)[^)]*\)", r"\1", text)
    return python_markdown.markdown(text, extensions=["attr_list", "tables"])


def inline_html(text: str) -> str:
    """One line of Markdown (a title with `code` in it) as HTML, without the paragraph around it."""
    return re.sub(r"^<p>(.*)</p>$", r"\1", python_markdown.markdown(text), flags=re.S)


def questions_json(nav: list, url_of) -> str:
    """Every question for the mock interview; `url_of(page)` gives its URL from the site's root."""
    questions = []
    for page in ordered_questions(nav):
        status, _ = proof_status(page)
        questions.append(
            {
                "id": page.slug,
                "title": page.title,
                "title_html": inline_html(page.title),
                "topic": page.topic,
                "topic_title": topic_title(page.topic),
                "difficulty": page.difficulty or "unrated",
                "url": url_of(page),
                "claims": claim_count(page),
                "proof": status,
                "answer_html": answer_html(page),
            }
        )
    return json.dumps({"questions": questions, "difficulties": list(DIFFICULTIES)}, ensure_ascii=False, indent=1)


# --- the cheat sheet ----------------------------------------------------------------------------


def show_number(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, (dict, list)):
        text = json.dumps(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return str(value)


def measured_note(page: Page, claim_id: str) -> str:
    """'measured X (control Y), DATE' from the latest current evidence of the claim, or ''."""
    for proof in page.proofs:
        if claim_id not in proof.claims:
            continue
        found = evidence.current(proof.snippet, proof.claims)
        claim = next((c for c in (found or {}).get("claims", []) if c["id"] == claim_id), None)
        if not claim or not claim["reports"]:
            return ""
        report = claim["reports"][0]
        verdict = "" if evidence.as_declared(claim) else " **FAILED**"
        return (
            # <code> with its text escaped: a backtick in a measured string cannot end a code span early
            f" — measured <code>{md_text(show_number(report['measured']))}</code>,"
            f" control <code>{md_text(show_number(report['control']))}</code>"
            f" ({found['date'][:10]}){verdict}"
        )
    return ""


def cheat_sheet(nav: list, from_page: Path) -> str:
    """Every page's key facts, grouped by topic; each links to its page and to the proving claim.

    On paper (docs/stylesheets/study.css) it flows in two columns and no question's list is split.
    """
    up = "../" * (len(from_page.relative_to(DOCS_DIR).parts) - 1)
    topics: dict = {}
    for page in ordered_questions(nav):
        if page.key_facts:
            topics.setdefault(page.topic, []).append(page)
    if not topics:
        return "*No page declares key facts yet.*"
    lines = ['<div class="cheat-sheet" markdown="1">']
    for topic, pages in topics.items():
        lines += ["", '<div class="cheat-topic" markdown="1">', "", f"## {topic_title(topic)}", ""]
        for page in pages:
            link = up + page.path.relative_to(DOCS_DIR).as_posix()
            lines += ['<div class="cheat-block" markdown="1">', ""]
            lines += [f"**[{escape_link_text(page.title)}]({link})**" + "{ .cheat-question }", ""]
            for fact in page.key_facts:
                lines.append(f'- {fact.get("fact", "").strip()} <span class="cheat-proof">{fact_proof(page, fact, link)}</span>')
            lines += ["", "</div>"]
        lines += ["", "</div>"]
    return "\n".join(lines + ["", "</div>"])


# Each page's headline key fact (its first): two per page already print on three A4 sides (87 pages).
COMPACT_FACTS_PER_PAGE = 1


def cheat_sheet_compact(nav: list) -> str:
    """Facts and numbers only, by topic, in three columns: at most two A4 pages when printed."""
    topics: dict = {}
    for page in ordered_questions(nav):
        for fact in page.key_facts[:COMPACT_FACTS_PER_PAGE]:
            text = str(fact.get("fact", "")).strip()
            if text:
                topics.setdefault(page.topic, []).append(text)
    if not topics:
        return "*No page declares key facts yet.*"
    lines = ['<div class="cheat-compact">']
    for topic, facts in topics.items():
        lines.append(f'<section class="cheat-compact-topic"><h2>{html.escape(topic_title(topic))}</h2><ul>')
        lines += [f"<li>{inline_html(fact)}</li>" for fact in facts]
        lines.append("</ul></section>")
    return "\n".join(lines + ["</div>"])


def fact_proof(page: Page, fact: dict, link: str) -> str:
    """The claim that proves a key fact (linked, with its latest measurement), or its source."""
    if fact.get("claim"):
        return f"[`{fact['claim']}`]({link}#{claim_anchor(fact['claim'])})" + measured_note(page, fact["claim"])
    if str(fact.get("source", "")).startswith(("http://", "https://")):
        return f"<{fact['source']}>"
    return f"`{fact.get('source', '')}`"


# --- the files the build adds -------------------------------------------------------------------


def add_generated_files(files, config):
    """Add the mock interview's questions and every figure that has evidence to mkdocs' files
    (written into the site, never into docs/). Raises figures.FigureError for a bad declaration."""
    from mkdocs.structure.files import File


    def url_of(page):
        return files.get_file_from_path(page.path.relative_to(DOCS_DIR).as_posix()).url

    generated = {QUESTIONS_JSON: questions_json(config["nav"] or [], url_of)}
    generated.update(figures.render_all(load_pages(DOCS_DIR)))
    for path, content in generated.items():
        files.append(File.generated(config, path, content=content))
    return files
