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
from verify.website import levels as evidence_levels
from verify.website.evidence_box import md_text

QUESTIONS_JSON = "assets/study/questions.json"
ANSWER = re.compile(r'\?\?\? success "30-second answer"\n((?:    .*\n|\n)+)')
STATUSES = ("passed", "failed", "no evidence yet", "GPU-ready, not yet run on a GPU", "sourced only")


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
    if not page.proofs:  # nothing installed here can run it (DeepSpeed's ZeRO tuning): checked quotes alone
        return "sourced only", "no proof runs here; every statement is a checked quote"
    failed, missing, skipped, passed = [], [], [], []
    for proof in page.proofs:
        found = evidence.current(proof)
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
        return "GPU-ready, not yet run on a GPU", "needs a GPU, skipped here: " + ", ".join(skipped)
    why = f"{len(passed)} of {len(page.proofs)} proofs passed"
    return "passed", why + (f"; GPU-ready, not yet run on a GPU: {', '.join(skipped)}" if skipped else "")


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
            f'data-status="{slugify(status)}" data-levels="{evidence_levels.row_levels(page)}" markdown="1">'
            f'<td markdown="span">[{escape_link_text(page.title)}]({relative})</td>'
            f"<td>{html.escape(topic_title(page.topic))}</td>"
            f'<td><span class="qi-level qi-level--{slugify(difficulty)}">{html.escape(difficulty)}</span></td>'
            f'<td class="qi-claims"{checked_title(page)}>{claim_count(page)}{checked_note(page)}</td>'
            f'<td><span class="qi-status qi-status--{slugify(status)}" title="{html.escape(why)}">{status}</span></td>'
            f'<td class="qi-evidence">{html.escape(evidence_levels.mix_cell(page))}</td>'
            f'<td class="qi-history" data-question="{html.escape(page.slug)}">not yet</td>'
            "</tr>"
        )
    return "\n".join(
        [
            evidence_levels.site_summary(pages),
            "",
            '<div class="qi-filters">',
            f'<label>Topic <select id="qi-topic"><option value="">all topics</option>{options}</select></label>',
            f'<label>Difficulty <select id="qi-difficulty"><option value="">any</option>{levels}</select></label>',
            f'<label>Proof <select id="qi-status"><option value="">any</option>{statuses}</select></label>',
            f'<label>Evidence <select id="qi-levels"><option value="">any</option>{evidence_levels.level_options()}'
            "</select></label>",
            f'<span id="qi-count" aria-live="polite">{len(pages)} questions</span>',
            "</div>",
            "",
            '<div class="qi-scroll" markdown="1">',
            '<table class="qi-table" id="question-index" markdown="1">',
            '<thead markdown="1"><tr markdown="1"><th>Question</th><th>Topic</th><th>Difficulty</th>'
            '<th class="qi-claims">Claims</th><th>Proof</th><th>Evidence</th><th>Your record</th></tr></thead>',
            "<tbody markdown=\"1\">",
            *rows,
            "</tbody>",
            "</table>",
            "</div>",
            "",
            "*Proof* is the verdict of the latest `pytest verify` run on the machine that built this site: "
            "**passed** (every claim held), **failed**, **no evidence yet** (not run since the claims last "
            "changed), **GPU-ready, not yet run on a GPU** (a proof that needs GPUs, skipped on a machine without), or "
            "**sourced only** (nothing installed here can run it: its statements are checked quotes). "
            "*Evidence* counts the page's claims and checked quotes per level: **measured** (a proof with a "
            "control and mutants on two processes), **modelled** (a quantitative model run as a proof), "
            "**sourced** (a quote checked word for word against the installed package or a dated excerpt), "
            "**GPU-ready** (a proof that needs CUDA). "
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
        found = evidence.current(proof)
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
    if fact.get("source") in page.sources:  # a checked quote (data/levels-spec.md): its entry on the page
        return f"[sourced: `{fact['source']}`]({link}#{evidence_levels.source_anchor(fact['source'])})"
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


# --- the one-week plan on the home page ---------------------------------------------------------

PLAN_DAYS = 7
WORDS_PER_MINUTE = 200  # a careful reader of technical prose
WORD = re.compile(r"[A-Za-z0-9_'’-]+|[\u3400-\u9fff]")  # a Chinese character reads about as long as a word


def reading_minutes(page: Page) -> float:
    """Minutes to read a page's Markdown after its front matter, folded answers and code included; the
    proof's code and evidence that the build adds in place of `<!-- proof: ... -->` are not."""
    text = page.path.read_text(encoding="utf-8")
    body = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S)
    body = re.sub(r"<!--.*?-->", "", body, flags=re.S)
    return len(WORD.findall(body)) / WORDS_PER_MINUTE


def balanced_days(minutes: list[float], days: int = PLAN_DAYS) -> list[int]:
    """Where each day's reading ends: `minutes` (in reading order) cut into `days` runs, so that the
    longest day is as short as it can be (the linear partition problem, by dynamic programming)."""
    count = len(minutes)
    days = max(1, min(days, count))
    before = [0.0]
    for value in minutes:
        before.append(before[-1] + value)
    # longest[k][i]: the longest day when the first i pages are cut into k days; cut[k][i]: where the last starts
    longest = [[float("inf")] * (count + 1) for _ in range(days + 1)]
    cut = [[0] * (count + 1) for _ in range(days + 1)]
    longest[0][0] = 0.0
    for k in range(1, days + 1):
        for i in range(k, count + 1):
            for start in range(k - 1, i):
                candidate = max(longest[k - 1][start], before[i] - before[start])
                if candidate < longest[k][i]:
                    longest[k][i], cut[k][i] = candidate, start
    ends, end = [], count
    for k in range(days, 0, -1):
        ends.append(end)
        end = cut[k][end]
    return ends[::-1]


def week_days(pages: list[Page], days: int = PLAN_DAYS) -> list[list[Page]]:
    """The question pages in the site's order (topic by topic, easier first), cut into days of about equal
    reading time: every page on exactly one day."""
    ends = balanced_days([reading_minutes(page) for page in pages], days)
    return [pages[start:end] for start, end in zip([0] + ends[:-1], ends)]


def lab_titles() -> dict[Path, str]:
    """Each lab's file and title (its header's `jupyter: proof: title`), in the labs' order."""
    import yaml

    from verify import labs

    titles = {}
    for path in labs.lab_paths(DOCS_DIR / "labs"):
        header, _ = labs.lab_header(path)
        declared = ((yaml.safe_load(header or "") or {}).get("jupyter") or {}).get("proof") or {}
        titles[path] = str(declared.get("title") or path.stem)
    return titles


def week_plan(nav: list, from_page: Path) -> str:
    """The home page's plan: a table of days, each with its questions (linked), its reading time and what
    to do after reading (a lab or a sheet to print, and a mock interview on the day's topics)."""
    up = "../" * (len(from_page.relative_to(DOCS_DIR).parts) - 1)
    pages = ordered_questions(nav)
    if not pages:
        return "*No question page yet.*"
    days = week_days(pages)
    extras = [f"[{title.split(':')[0]}]({up}{path.relative_to(DOCS_DIR).as_posix()}): {title.split(':', 1)[-1].strip()}"
              for path, title in lab_titles().items()]  # fmt: skip
    extras += [f"print the [two-page cheat sheet]({up}cheat-sheet-compact.md)",
               f"the [errata]({up}errata.md) of the handouts"]  # fmt: skip
    minutes = [sum(reading_minutes(page) for page in day) for day in days]
    rows = ["| Day | Read | Reading time | Then |", "|---|---|---|---|"]
    for number, (day, day_minutes) in enumerate(zip(days, minutes), 1):
        topics: dict = {}
        for page in day:
            topics.setdefault(page.topic, []).append(page)
        read = "<br>".join(  # one line per topic
            f"**{topic_title(topic)}**: " + " · ".join(
                f"[{escape_link_text(page.title)}]({up}{page.path.relative_to(DOCS_DIR).as_posix()})" for page in in_topic)
            for topic, in_topic in topics.items())  # fmt: skip
        levels = ", ".join(f"{sum((p.difficulty or 'unrated') == level for p in day)} {level}"
                           for level in DIFFICULTIES + ("unrated",) if any((p.difficulty or "unrated") == level for p in day))  # fmt: skip
        then = [extra for index, extra in enumerate(extras) if index % len(days) == number - 1]
        if number < len(days):
            wanted = ",".join(topics)
            then.append(f'<a href="{up}mock-interview/#topic={html.escape(wanted)}">a mock interview</a> on these topics')
        else:
            then.append(f'<a href="{up}mock-interview/">a mock interview</a> of every topic, '
                        "*only questions due again or missed last time*")  # fmt: skip
        rows.append(f"| {number} | {read.replace('|', '&#124;')} | {round(day_minutes)} min, {len(day)} question{'s' if len(day) > 1 else ''} "
                    f"({levels}) | {'; '.join(then)} |")  # fmt: skip
    intro = (f"Every question page once, in the site's order (topic by topic, easier questions first), cut into "
             f"{len(days)} days of about the same reading time: {round(min(minutes))} to {round(max(minutes))} "
             f"minutes a day at {WORDS_PER_MINUTE} words a minute, follow-up answers included.")  # fmt: skip
    return intro + "\n\n" + "\n".join(rows)
