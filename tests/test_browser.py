"""The built site in a real browser (Debian's chromium driven by Playwright): search, the question
table's filters, a whole mock interview, the figures, every page without console errors or requests to
other hosts, and a phone-sized screen.

The site is built with made-up evidence for its proofs (one page left without, one failing), so the
figures are drawn and every proof status shows. One browser, one context, one local http server.
Skipped where chromium or playwright is missing, except under REQUIRE_BROWSER_TESTS=1 (CI sets it).
"""

import gzip
import html
import http.server
import importlib.util
import io
import json
import os
import re
import shutil
import threading
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.test_site import build
from verify import evidence
from verify.website import figures, study
from verify.website import levels as evidence_levels
from verify.pages import load_pages, question_pages
from verify.paths import DOCS_DIR

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
AVAILABLE = Path(CHROMIUM).exists() and importlib.util.find_spec("playwright") is not None
pytestmark = pytest.mark.skipif(
    not AVAILABLE and os.environ.get("REQUIRE_BROWSER_TESTS") != "1",
    reason="needs Debian's chromium (apt-get install chromium) and `pip install playwright`; .ci/run installs both",
)
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]  # fmt: skip
PAGES = load_pages()
QUESTIONS = question_pages(PAGES)



def shown_title(page) -> str:
    """A title as the reader sees it: `code` in a title renders as code, without its backticks."""
    return page.title.replace("`", "")

def made_up_evidence(evidence_dir: Path) -> dict:
    """Evidence for every proof that runs without a GPU: the first question page gets none, the second
    fails, the rest pass. Each claim's details hold whatever its page's figures read. Returns the
    status each page should show."""
    wanted: dict = {}  # claim id -> {detail name: value}
    listed: set = set()  # claims whose figures index into measured or control
    for page in QUESTIONS:
        for spec in figures.declared(page):
            for item in spec["data"]:
                details = wanted.setdefault(item.get("claim") or spec.get("claim"), {})
                if str(item.get("events", "")).startswith("details."):  # a timeline: two events of one kind
                    details[item["events"].split(".")[1]] = [["made up", "0", 0.0, 1.0], ["made up", "1", 1.5, 3.0]]
                for number, key in enumerate(sum(([k] if not isinstance(k, list) else k
                                                  for k in (item.get("value"), item.get("x"), item.get("y"))), [])):
                    if isinstance(key, str) and key.startswith("details."):
                        name = key.split(".")[1]
                        whole = isinstance(item.get("y"), str) and item["y"] == key
                        indexed = key.split(".")[-1].isdigit()  # details.NAME.0: a list in the evidence
                        path = key.split(".")[2:]
                        if len(path) > 1 or (path and not path[0].isdigit()):  # details.NAME.A(.B): keyed as named
                            if not isinstance(details.get(name), dict):
                                details[name] = {}
                            level = details[name]
                            for part in path[:-1]:
                                level = level.setdefault(part, {})
                            level[path[-1]] = float(number + 2)
                            continue
                        details[name] = ({"1": 0.5, "2": 0.33, "4": 0.2} if whole else
                                         [float(i + 2) for i in range(8)] if indexed else float(number + 2))
                    elif isinstance(key, str) and key.split(".")[0] in ("measured", "control") and "." in key:
                        listed.add(item.get("claim") or spec.get("claim"))  # measured.0: a list measured
    proven = [page for page in QUESTIONS if page.proofs]
    for index, page in enumerate(proven):
        if index == 0:
            continue
        for proof in page.proofs:
            if proof.requires == "cuda":
                continue
            record = {
                "page": page.slug, "snippet": proof.snippet, "date": "2026-01-02T03:04:05+00:00",
                "versions": {"python": "3.11.7", "torch": "9.9.9", "accelerate": "8.8.8"}, "world_size": 2,
                "backend": "gloo", "distributed_type": "MULTI_CPU", "device_per_rank": {"0": "cpu", "1": "cpu"},
                "status": "finished", "snippet_seconds": 0.1,
                "claims": [{"id": claim, "statement": declared.says, "passed": index != 1,
                            "reason": "" if index != 1 else "made up: the control held too",
                            "reports": [{"rank": rank, "measured": [1.25e-08, 0.0] if claim in listed else 0.0 if rank else 1.25e-08,
                                         "control": [0.5, 0.5] if claim in listed else 0.5,
                                         "op": "<=", "bound": 1e-06, "details": wanted.get(claim, {})}
                                        for rank in (0, 1)]}
                           for claim, declared in proof.claims.items()],
            }  # fmt: skip
            evidence.write(record, evidence_dir)
    return {page.slug: "no evidence yet" if index == 0 else "failed" if index == 1 else None
            for index, page in enumerate(proven)}  # fmt: skip


SUB = "sub/"  # the site is served under a sub-path (as on GitHub Pages), built with that site_url
NOISE = "/home/builder/.venv/lib/python3.11/site-packages/tqdm/auto.py:21: TqdmWarning: IProgress not found."


def decorate_evidence(evidence_dir: Path) -> dict:
    """On top of the made-up evidence: a page whose first claim measured whole numbers and whose proof ran
    against a mutant, one whose evidence predates its code (another fingerprint), markup in a failure's
    reason. Returns {what: page slug or claim id}."""
    proven = [page for page in QUESTIONS if page.proofs and all(p.requires != "cuda" for p in page.proofs)]
    whole, stale, failing = proven[2], proven[3], [p for p in QUESTIONS if p.proofs][1]
    path = evidence.path_of(whole.proofs[0].page, whole.proofs[0].snippet, evidence_dir)
    record = json.loads(path.read_text())
    claim = record["claims"][0]
    for report in claim["reports"]:
        report.update(measured=32768.0, control=16384, op="==", bound=32768)
    record["mutants"] = [{
        "mutant": "made-up-bug", "describes": "the library <b>drops</b> every second gradient", "status": "killed",
        "reached_ranks": [0, 1],
        "claims": [{"id": claim["id"], "killed": True, "how": "measured missed the bound",
                    "reports": [{"rank": 0, "measured": 0.68, "control": 0.41, "op": "<=", "bound": 1e-06}]}]}]  # fmt: skip
    path.write_text(json.dumps(record))
    path = evidence.path_of(stale.proofs[0].page, stale.proofs[0].snippet, evidence_dir)
    path.write_text(json.dumps({**json.loads(path.read_text()), "fingerprint": "0" * 64, "versions": evidence.versions()}))
    for proof in failing.proofs:
        path = evidence.path_of(proof.page, proof.snippet, evidence_dir)
        if path.exists():
            record = json.loads(path.read_text())
            record["claims"][0]["reason"] = 'made up: <b>not bold</b> & "quoted"'
            path.write_text(json.dumps(record))
    return {"whole": whole.slug, "whole_path": whole.path, "whole_claim": claim["id"], "stale": stale.slug,
            "stale_path": stale.path, "failing_path": failing.path}  # fmt: skip


def executed_lab(labs_dir: Path) -> str:
    """The first lab as `pytest verify` leaves it, with tqdm's warning (and the machine's path) in a cell."""
    import jupytext
    import nbformat

    labs_dir.mkdir(parents=True, exist_ok=True)
    source = sorted((DOCS_DIR / "labs").glob("lab*.py"))[0]
    notebook = jupytext.read(source)
    cell = next(cell for cell in notebook.cells if cell.cell_type == "code")
    cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text=NOISE + " Please update jupyter.\n"),
                    nbformat.v4.new_output("stream", name="stdout", text="the cell's own output\n")]  # fmt: skip
    cell.execution_count = 1
    notebook.metadata["verify"] = {"date": "2026-11-30", "seconds": 1.0, "status": "finished"}
    jupytext.write(notebook, labs_dir / f"{source.stem}.ipynb")
    return source.stem


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """(base URL, site folder, expected statuses): the site built with made-up evidence, served over http
    under /sub/ (a missing page gets the site's 404 page, as on GitHub Pages)."""
    evidence_dir = tmp_path_factory.mktemp("made-up-evidence")
    statuses = made_up_evidence(evidence_dir)
    statuses["decorated"] = decorate_evidence(evidence_dir)
    labs_dir = tmp_path_factory.mktemp("executed-labs")
    statuses["lab"] = executed_lab(labs_dir)
    folder = tmp_path_factory.mktemp("site")
    result = build(folder, evidence_dir, labs_dir, SITE_URL="http://127.0.0.1/" + SUB)
    assert result.returncode == 0, result.stdout + result.stderr

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def send_head(self):
            if not self.path.startswith("/" + SUB):
                self.send_error(404)
                return None
            self.path = self.path[len(SUB):]
            target = Path(self.translate_path(self.path))
            if target.exists() and (target.is_file() or (target / "index.html").exists()):
                return super().send_head()
            body = (folder / "404.html").read_bytes()
            self.send_response(404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return io.BytesIO(body)

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):
            pass  # a browser that drops a connection it no longer needs is no failure

    server = Server(("127.0.0.1", 0), partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/{SUB}", folder, statuses
    server.shutdown()


class Watch:
    """Console errors, uncaught exceptions and requests to other hosts, from every page of the context."""

    def __init__(self, context):
        self.errors, self.foreign = [], []
        context.on("console", lambda message: message.type == "error" and self.errors.append(
            f"{message.page.url if message.page else '?'}: {message.text}"))  # fmt: skip
        context.on("weberror", lambda error: self.errors.append(f"uncaught: {error.error}"))
        context.on("request", self.request)

    def request(self, request):
        parts = urlsplit(request.url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.hostname != "127.0.0.1":
            self.foreign.append(request.url)

    def check(self):
        errors, foreign = self.errors[:], self.foreign[:]
        self.errors.clear()
        self.foreign.clear()
        assert errors == [], errors
        assert foreign == [], foreign


@pytest.fixture(scope="module")
def browser(site):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = chromium.new_context(viewport={"width": 1366, "height": 900}, service_workers="block")
        context.set_default_timeout(15000)
        watch = Watch(context)
        yield context, watch
        context.close()
        chromium.close()


@pytest.fixture
def page(browser):
    """A fresh tab; after the test, no console error and no request to another host may have happened."""
    context, watch = browser
    tab = context.new_page()
    yield tab
    tab.close()
    watch.check()


@pytest.fixture
def own(browser):
    """A tab in a context of its own (its own localStorage), desktop-sized; `own(**options)` for others
    (a phone, a time zone). Checked for console errors and foreign requests like `page`."""
    context, _ = browser
    made = []

    def make(**options):
        fresh = context.browser.new_context(**{"viewport": {"width": 1366, "height": 900}, "service_workers": "block",
                                               "accept_downloads": True, **options})  # fmt: skip
        fresh.set_default_timeout(15000)
        watch = Watch(fresh)
        made.append((fresh, watch))
        tab = fresh.new_page()
        tab.watch = watch
        return tab

    yield make
    for fresh, watch in made:
        fresh.close()
        watch.check()


def test_search_finds_english_and_chinese_words(site, page):
    base, _, _ = site
    page.goto(base)
    box = page.locator("input.md-search__input")
    for word, expected in (("bubble", "pipeline-parallelism"), ("数据并行", "data-parallel-accuracy"),
                           ("流水线并行", "pipeline-parallelism")):  # fmt: skip
        box.fill("")  # no results left from the previous query
        box.press("End")
        page.wait_for_selector(".md-search-result__link", state="detached")
        box.fill(word)
        box.press("End")
        page.wait_for_selector(f".md-search-result__link[href*='{expected}']")


def test_the_question_table_filters_by_topic_difficulty_and_proof(site, page):
    base, _, statuses = site
    page.goto(base)
    rows = page.locator("#question-index tbody tr")
    assert rows.count() == len(QUESTIONS)

    def shown():
        return [row for row in rows.all() if row.is_visible()]

    topic = max({p.topic for p in QUESTIONS}, key=lambda t: sum(p.topic == t for p in QUESTIONS))
    page.select_option("#qi-topic", topic)
    expected = sum(p.topic == topic for p in QUESTIONS)
    assert len(shown()) == expected and {row.get_attribute("data-topic") for row in shown()} == {topic}
    assert page.locator("#qi-count").inner_text() == f"{expected} of {len(QUESTIONS)} questions"
    assert f"topic={topic}" in page.url  # a filtered list can be bookmarked

    level = next((p.difficulty or "unrated" for p in QUESTIONS if p.topic == topic))
    page.select_option("#qi-difficulty", level)
    assert len(shown()) == sum(p.topic == topic and (p.difficulty or "unrated") == level for p in QUESTIONS) > 0

    page.select_option("#qi-topic", "")
    page.select_option("#qi-difficulty", "")
    for status in ("failed", "no evidence yet"):
        page.select_option("#qi-status", study.slugify(status))
        titles = sorted(row.locator("td").first.inner_text() for row in shown())
        wanted = sorted(shown_title(p) for p in QUESTIONS if statuses.get(p.slug) == status)
        assert titles == wanted, status
    page.select_option("#qi-status", "passed")
    assert len(shown()) > 0

    page.select_option("#qi-status", "")
    page.select_option("#qi-levels", "sourced")  # a page with checked quotes among other levels
    titles = sorted(row.locator("td").first.inner_text() for row in shown())
    assert titles == sorted(shown_title(p) for p in QUESTIONS if "sourced" in evidence_levels.row_levels(p).split()) != []
    page.select_option("#qi-levels", "")

    page.goto(base + f"#difficulty={level}")  # the filter read back from the address
    assert page.locator("#qi-difficulty").input_value() == level


def test_a_whole_mock_interview_kept_across_a_reload(site, page):
    base, folder, _ = site
    data = json.loads((folder / study.QUESTIONS_JSON).read_text())["questions"]
    topic = max({q["topic"] for q in data}, key=lambda t: sum(q["topic"] == t for q in data))
    in_topic = [q for q in data if q["topic"] == topic]
    count = min(3, len(in_topic))
    assert count >= 2, "the test needs a topic with two questions"

    page.goto(base + "mock-interview/")
    page.wait_for_selector("#mock-setup")
    for box in page.locator("input[name=topic]").all():
        box.set_checked(box.get_attribute("value") == topic)
    assert page.locator("#mock-matching").inner_text() == f"{len(in_topic)} questions match"
    page.fill("#mock-count", str(count))
    page.select_option("#mock-seconds", "30")
    page.click("#mock-start")

    grades = ["knew", "missed", "partly"][:count]
    asked = []
    for number, grade in enumerate(grades):
        page.wait_for_selector(f"#mock-position:text('Question {number + 1} of {count}')")
        question = page.locator("#mock-card").get_attribute("data-question")
        asked.append(question)
        if number == 0:  # the countdown runs, and survives a reload as an unfinished interview
            first = page.locator("#mock-clock").inner_text()
            assert re.fullmatch(r"0:(30|29)", first)
            page.wait_for_function("document.getElementById('mock-clock').textContent !== '%s'" % first)
            page.reload()
            page.click("#mock-resume")
            assert page.locator("#mock-card").get_attribute("data-question") == question
        assert page.locator("#mock-grades").is_hidden()
        page.click("#mock-reveal")
        answer = page.locator("#mock-answer")
        assert answer.is_visible() and len(answer.inner_text()) > 100
        url = next(q["url"] for q in data if q["id"] == question)
        assert page.locator("#mock-page-link").get_attribute("href").endswith("/" + url)
        page.click(f"button[data-grade={grade}]")

    page.wait_for_selector("#mock-summary")
    score = {"knew": 1, "partly": 0.5, "missed": 0}
    percent = f"{round(100 * sum(score[g] for g in grades) / count)}%"
    row = page.locator(f"#mock-summary-table tr[data-topic={topic}]")
    assert row.locator(".mock-score").inner_text() == percent
    assert len(set(asked)) == count and all(q in {x["id"] for x in in_topic} for q in asked)

    page.reload()  # the progress is kept in localStorage
    page.wait_for_selector("#mock-progress-line")
    assert page.locator("#mock-progress-line").inner_text().startswith(f"{count} questions graded over 1 interview")
    assert page.locator(f"#mock-progress tr[data-topic={topic}] .mock-seen").inner_text() == f"{count} / {len(in_topic)}"
    assert page.locator("#mock-summary .mock-score").inner_text() == percent

    # Leitner: the missed question comes back first in the next interview.
    for box in page.locator("input[name=topic]").all():
        box.set_checked(box.get_attribute("value") == topic)
    page.fill("#mock-count", "1")
    page.click("#mock-start")
    page.wait_for_selector("#mock-card")
    assert page.locator("#mock-card").get_attribute("data-question") == asked[grades.index("missed")]


@pytest.fixture(scope="module")
def tour(site, browser):
    """Every HTML page of the site loaded once: {path: [the figures' images]}, with the console errors and
    requests to other hosts that all these loads caused."""
    base, folder, _ = site
    context, watch = browser
    tab = context.new_page()
    images, failed_notes = {}, set()
    for path in sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*.html")):
        tab.goto(base + path.removesuffix("index.html"), wait_until="load")
        if "failed in the latest run, so it draws no figure" in tab.content():
            failed_notes.add(path)
        images[path] = tab.eval_on_selector_all(
            "figure.study-figure img",
            "imgs => imgs.map(img => ({src: img.getAttribute('src'), alt: img.alt, loaded: img.complete && img.naturalWidth > 0,"
            " zoom: (img.closest('a') || {}).href || ''}))",
        )
    tab.close()
    errors, foreign = watch.errors[:], watch.foreign[:]
    watch.errors.clear()
    watch.foreign.clear()
    return images, errors, foreign, failed_notes


def test_every_page_loads_without_console_errors_or_requests_to_other_hosts(tour):
    images, errors, foreign, _ = tour
    assert len(images) > len(QUESTIONS)
    assert errors == []
    assert foreign == []


def test_figures_load_with_alt_text(tour):
    images, _, _, failed_notes = tour
    failing = [page for page in QUESTIONS if page.proofs][1]  # made_up_evidence fails its claims
    drawn = 0
    for question in QUESTIONS:
        path = question.path.relative_to(DOCS_DIR).with_suffix("").as_posix() + "/index.html"
        if question is failing:  # a failed claim's figure would be no picture of the mechanism: it says so
            assert not any(image["src"].endswith(".svg") for image in images[path])
            assert (path in failed_notes) == bool(figures.declared(question)), f"{question.slug}: no note that its claim failed"
            continue
        for spec in figures.declared(question):
            found = [image for image in images[path] if image["src"].endswith(f"/{spec['id']}.svg")]
            assert len(found) == 1, f"{question.slug}: figure {spec['id']} is not on the page"
            assert found[0]["alt"].startswith(spec["alt"].strip().rstrip(".")[:40]) and "Values:" in found[0]["alt"]
            assert found[0]["loaded"], f"{question.slug}: figure {spec['id']} did not load"
            assert found[0]["zoom"].endswith(f"/{spec['id']}.svg"), "on a phone a figure opens full size"
            drawn += 1
    assert drawn >= 20


def test_on_a_phone_nothing_scrolls_sideways(site, page):
    base, _, _ = site
    page.set_viewport_size({"width": 390, "height": 844})
    overflow = "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    for path in ("", "mock-interview/", "cheat-sheet/"):
        page.goto(base + path)
        assert page.evaluate(overflow) <= 0, f"/{path} scrolls sideways on a phone"
    page.goto(base + "mock-interview/")
    page.click("#mock-start")
    page.click("#mock-reveal")
    assert page.locator("#mock-answer").is_visible()
    assert page.evaluate(overflow) <= 0, "a mock interview question scrolls sideways on a phone"


# --- the defects of issue 20, each with the test that failed before its fix -----------------------


def page_url(page_path: Path) -> str:
    return page_path.relative_to(DOCS_DIR).with_suffix("").as_posix() + "/"


def start_interview(tab, base, topic=None, count=2, seconds="30"):
    tab.goto(base + "mock-interview/")
    tab.wait_for_selector("#mock-setup")
    if topic:
        tab.click(f"button[data-only={topic}]")
    tab.fill("#mock-count", str(count))
    tab.select_option("#mock-seconds", seconds)
    tab.click("#mock-start")
    tab.wait_for_selector("#mock-card")


def stored(tab) -> dict:
    return tab.evaluate("JSON.parse(localStorage.getItem('accelerate-interview-study-v1') || '{}')")


def test_a_double_click_on_reveal_does_not_end_the_interview(site, own):
    """Defect 1: 'End the interview' slid under the pointer, ended without confirmation, overwrote the last
    summary, and the aborted session counted for the Leitner intervals."""
    base, _, _ = site
    tab = own()
    start_interview(tab, base, count=1)  # one real interview first: its summary must survive
    tab.click("#mock-reveal")
    tab.click("button[data-grade=knew]")
    tab.wait_for_selector("#mock-summary")
    summary = tab.locator("#mock-summary").inner_text()
    before = stored(tab)
    assert before["session"] == 1

    start_interview(tab, base, count=2)
    tab.dblclick("#mock-reveal")
    assert tab.locator("#mock-card").count() == 1, "a double-click on Reveal ended the interview"
    assert tab.locator("#mock-answer").is_visible() and tab.locator("#mock-grades").is_visible()
    assert tab.locator("#mock-position").inner_text().startswith("Question 1 of 2"), "a double-click graded"

    dialogs = []
    tab.once("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    tab.click("#mock-stop")
    assert dialogs and tab.locator("#mock-card").count() == 1, "ending asks first; 'cancel' keeps the interview"
    tab.click("button[data-grade=missed]")
    tab.once("dialog", lambda dialog: dialog.accept())
    tab.click("#mock-stop")
    tab.wait_for_selector("#mock-setup")
    after = stored(tab)
    assert after["session"] == 1 and after["cards"] == before["cards"], "an ended interview counted"
    assert tab.locator("#mock-summary").inner_text() == summary, "an ended interview replaced the last summary"


def test_resume_from_checkpoint_has_one_title_and_a_whole_table_of_contents(site, page):
    """Defect 2: a wrapped line '#4019 and #4232);' became a second H1 and cut the table of contents."""
    base, _, _ = site
    page.goto(base + "questions/training-mechanics/resume-from-checkpoint/")
    assert page.locator("article h1").count() == 1
    toc = page.locator(".md-sidebar--secondary .md-nav__link").all_inner_texts()
    assert "Mechanism" in toc and {"Proof", "Sources", "Follow-up questions"} <= set(toc), toc
    assert "#4019" in page.locator("article").inner_text()


def test_no_body_line_starts_with_a_hash_and_a_digit():
    """Python-Markdown reads '#4019 ...' at the start of a line as a heading."""
    offenders = []
    for path in sorted(DOCS_DIR.rglob("*.md")):
        fenced = False
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
            if not fenced and re.match(r"#\d", line):
                offenders.append(f"{path.relative_to(DOCS_DIR)}:{number}: {line[:60]}")
    assert offenders == []


def search(tab, word):
    box = tab.locator("input.md-search__input")
    box.fill("")
    box.press("End")
    tab.wait_for_selector(".md-search-result__link", state="detached")
    box.fill(word)
    box.press("End")
    tab.wait_for_selector(".md-search-result__item")
    tab.wait_for_timeout(300)  # the list is filled in one go; let it settle
    return tab.locator(".md-search-result__item > .md-search-result__link")


def test_search_previews_do_not_give_away_the_30_second_answer(site, page):
    """Defect 3: search result previews printed the hidden 30-second answer."""
    base, folder, _ = site
    target = next(q for q in QUESTIONS if q.slug == "data-parallel-accuracy")
    answer = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", study.answer_html(target))).strip()
    index = json.loads((folder / "search" / "search_index.json").read_text())
    indexed = " ".join(re.sub(r"<[^>]+>", "", doc["text"]) for doc in index["docs"])
    assert answer[:60] not in re.sub(r"\s+", " ", indexed)
    page.goto(base)
    results = search(page, "accurate")
    assert any("data-parallel-accuracy" in (link.get_attribute("href") or "") for link in results.all())
    shown = re.sub(r"\s+", " ", page.locator(".md-search-result").inner_text())
    assert answer[:40] not in shown


def test_chinese_search_puts_the_parallelism_page_first(site, page):
    """Defect 4: 数据并行 ranked the data-vs-model-parallelism page 8th."""
    base, _, _ = site
    page.goto(base)
    for word in ("数据并行", "模型并行"):
        first = search(page, word).first.get_attribute("href")
        assert "what-is-distributed-training" in first, (word, first)


@pytest.mark.parametrize("width", [390, 360])
def test_the_mock_interview_setup_fits_a_phone(site, own, width):
    """Defect 5: a nowrap topic label overflowed at 390 px; at 360 px the page scrolled sideways."""
    base, _, _ = site
    tab = own(viewport={"width": width, "height": 800})
    tab.goto(base + "mock-interview/")
    tab.wait_for_selector("#mock-setup")
    assert tab.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
    overflowing = tab.eval_on_selector_all(
        ".mock-choice", "els => els.filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth)"
                        ".map(e => e.textContent)")  # fmt: skip
    assert overflowing == []


def test_a_lab_table_of_contents_keeps_inline_code_and_the_evidence(site, page):
    """Defect 6: labs' tables of contents dropped inline code and omitted 'Claims and evidence'."""
    base, _, statuses = site
    page.goto(base + f"labs/{statuses['lab']}/")
    toc = page.locator(".md-sidebar--secondary .md-nav__link").all_inner_texts()
    assert "Trap 2: an Accelerator created in the notebook" in toc, toc
    assert "Claims and evidence" in toc, toc


def test_a_lab_shows_no_tqdm_warning_or_build_path(site, page):
    """Defect 7: every lab's first cell showed a red TqdmWarning with the build machine's path."""
    base, _, statuses = site
    page.goto(base + f"labs/{statuses['lab']}/")
    text = page.locator("article").inner_text()
    assert "the cell's own output" in text  # the executed copy is the one shown
    assert "TqdmWarning" not in text and "/home/builder" not in text


def test_the_last_interview_date_is_the_readers_own_day(site, own):
    """Defect 8: the date was UTC (toISOString()), a day off in Asia."""
    base, _, _ = site
    tab = own(timezone_id="Asia/Tokyo")
    tab.clock.set_fixed_time("2026-01-01T20:00:00Z")  # 2 January, 05:00 in Tokyo
    start_interview(tab, base, count=1)
    tab.click("#mock-reveal")
    tab.click("button[data-grade=partly]")
    tab.wait_for_selector("#mock-summary")
    assert "(2026-01-02)" in tab.locator("#mock-summary h2").inner_text()


def test_a_proof_downloads_as_a_script_that_runs_on_its_own(site, page):
    """Defect 9: a copied proof imported _claims, which the site neither showed nor offered, and no page
    linked to the repository."""
    base, _, _ = site
    page.goto(base + "questions/data-parallelism/data-parallel-accuracy/")
    assert "github.com/accelerate-interview-proofs" in page.locator("a.md-source").first.get_attribute("href")
    assert "/edit/" in page.locator("a.md-content__button[href*=edit]").first.get_attribute("href")
    link = page.locator("a.proof-download").first
    with page.expect_download() as download:
        link.click()
    script = Path(download.value.path()).read_text()
    assert download.value.suggested_filename == "ddp_gradients_match_full_batch.py"
    assert "_inline_module('_claims'" in script and "def report(" in script
    compile(script, "ddp_gradients_match_full_batch.py", "exec")
    assert "accelerate launch --multi_gpu --num_processes 2 ddp_gradients_match_full_batch.py" in page.locator("article").inner_text()
    claims = page.request.get(base + "downloads/_claims.py")
    assert claims.ok and "def report(" in claims.text()


# --- the evidence box ------------------------------------------------------------------------------


def test_the_evidence_box_reads_as_sentences_and_numbers(site, page):
    base, _, statuses = site
    info = statuses["decorated"]
    page.goto(base + page_url(info["whole_path"]))
    code = page.locator("details.example").first
    assert code.get_attribute("open") is None, "the proof's code starts folded"
    box = page.locator(".evidence-box").first
    row = box.locator(".ev-claim").first
    says = next(p for p in QUESTIONS if p.slug == info["whole"]).proofs[0].claims[info["whole_claim"]].says
    assert row.locator(".ev-says").inner_text().strip() == says.strip()
    assert not row.locator(".ev-numbers").is_visible(), "the box starts folded to its sentence and verdict rows"
    row.locator(".ev-more > summary").click()
    numbers = row.locator(".ev-numbers").inner_text()
    assert "32768" in numbers and "16384" in numbers and "e+04" not in numbers
    assert "exactly 32768" in numbers
    assert row.locator(".ev-verdict").inner_text().startswith("Held")
    assert info["whole_claim"] in row.locator(".ev-id").inner_text()
    assert row.locator(".ev-id code").evaluate("e => getComputedStyle(e).wordBreak") == "normal"
    where = box.locator(".ev-where").inner_text()
    assert "2 January 2026" in where and "torch 9.9.9" in where and "2 processes on the CPU" in where
    # the claim id never breaks mid-word on a desktop
    assert page.eval_on_selector(f"#claim-{info['whole_claim']} .ev-id code", "e => getComputedStyle(e).whiteSpace") == "nowrap"
    # a mutant row in plain words, and markup in evidence shown as text
    box.locator(".ev-mutants > summary").click()
    mutant = box.locator(".ev-mutant").first.inner_text()
    assert "Broken on purpose: the library <b>drops</b> every second gradient" in mutant
    assert "0.68" in mutant and "so the claim does not hold there: caught" in mutant
    assert box.locator(".ev-mutant strong").count() == 0, "a caught mutant is not flagged"


def test_landing_on_a_claim_highlights_it(site, page):
    base, _, statuses = site
    info = statuses["decorated"]
    page.goto(base + page_url(info["whole_path"]) + f"#claim-{info['whole_claim']}")
    target = page.locator(f"#claim-{info['whole_claim']}")
    assert target.evaluate("e => e.matches(':target')")
    assert target.evaluate("e => getComputedStyle(e).outlineStyle") != "none"


def test_stale_evidence_and_markup_in_reasons_are_told_plainly(site, page):
    base, _, statuses = site
    info = statuses["decorated"]
    page.goto(base + page_url(info["stale_path"]))
    assert "measured on an earlier version of this snippet" in page.locator(".evidence-box .ev-stale").first.inner_text()
    page.goto(base + page_url(info["failing_path"]))
    failed = page.locator(".evidence-box .ev-verdict--failed").first.inner_text()
    assert 'made up: <b>not bold</b> & "quoted"' in failed


def test_on_a_phone_the_evidence_rows_are_cards(site, own):
    base, _, statuses = site
    tab = own(viewport={"width": 390, "height": 844})
    tab.goto(base + page_url(statuses["decorated"]["whole_path"]))
    assert tab.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
    row = tab.locator(".ev-claim").first
    assert len(row.evaluate("e => getComputedStyle(e).gridTemplateColumns").split()) == 1
    row.locator(".ev-more > summary").click()
    for mutants in tab.locator(".ev-mutants > summary").all():  # ids in the mutant list wrap, never scroll
        mutants.click()
    assert tab.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
    says, numbers = row.locator(".ev-says").bounding_box(), row.locator(".ev-numbers").bounding_box()
    assert numbers["y"] >= says["y"] + says["height"] - 1, "on a phone the numbers stack under the sentence"


# --- review mode -----------------------------------------------------------------------------------


def two_question_topic(site):
    _, folder, _ = site
    data = json.loads((folder / study.QUESTIONS_JSON).read_text())["questions"]
    topic = max({q["topic"] for q in data}, key=lambda t: sum(q["topic"] == t for q in data))
    return topic, [q for q in data if q["topic"] == topic]


def test_review_mode_remembers_undoes_and_moves(site, own):
    base, _, _ = site
    topic, in_topic = two_question_topic(site)
    tab = own()
    start_interview(tab, base, topic=topic, count=3, seconds="90")
    assert tab.evaluate("document.activeElement.id") == "mock-question", "focus moves to the new question"
    first = tab.locator("#mock-card").get_attribute("data-question")
    tab.click("#mock-reveal")
    assert tab.locator("button[data-grade=knew]").is_visible()
    in_view = ("() => { const r = document.querySelector('button[data-grade=missed]').getBoundingClientRect();"
               " return r.top >= 0 && r.bottom <= innerHeight + 1; }")  # fmt: skip
    try:
        tab.wait_for_function(in_view, timeout=3000)  # the grade buttons are scrolled into view
    except Exception:  # noqa: BLE001
        where = tab.evaluate("() => [JSON.stringify(document.querySelector('button[data-grade=missed]').getBoundingClientRect()),"
                             " innerHeight, scrollY, document.activeElement.outerHTML.slice(0, 80)]")  # fmt: skip
        raise AssertionError(f"the grade buttons are out of view: {where}") from None
    tab.click("button[data-grade=missed]")
    tab.wait_for_selector("#mock-position:text('Question 2 of 3')")
    tab.click("#mock-undo")  # back to the first question, its grade forgotten
    tab.wait_for_selector("#mock-position:text('Question 1 of 3')")
    assert tab.locator("#mock-card").get_attribute("data-question") == first
    for grade in ("missed", "knew", "partly"):
        tab.click("#mock-reveal")
        tab.click(f"button[data-grade={grade}]")
    tab.wait_for_selector("#mock-summary")
    cards = stored(tab)["cards"]
    assert cards[first]["grade"] == "missed" and cards[first]["seen"] == 1

    tab.reload()  # the setup is remembered: this topic only, 3 questions, 90 s
    tab.wait_for_selector("#mock-setup")
    checked = tab.eval_on_selector_all("input[name=topic]:checked", "els => els.map(e => e.value)")
    assert checked == [topic] and tab.input_value("#mock-count") == "3" and tab.input_value("#mock-seconds") == "90"
    tab.check("#mock-due-only")  # missed and partly come back; the known one and the unseen do not
    assert tab.locator("#mock-matching").inner_text() == "2 questions match"

    tab.goto(base + f"questions/{topic}/")  # 'only this topic' in one click from the topic's page
    tab.click("#drill-topic")
    tab.wait_for_selector("#mock-setup")
    assert tab.eval_on_selector_all("input[name=topic]:checked", "els => els.map(e => e.value)") == [topic]

    tab.goto(base)  # the home table shows each question's record
    record = tab.locator(f"td.qi-history[data-question={first}]").inner_text()
    assert record.startswith("seen 1×, last missed") and "due now" in record


def test_progress_moves_to_another_device_as_a_file(site, own, tmp_path):
    base, _, _ = site
    laptop = own()
    start_interview(laptop, base, count=1)
    laptop.click("#mock-reveal")
    laptop.click("button[data-grade=knew]")
    laptop.wait_for_selector("#mock-summary")
    with laptop.expect_download() as download:
        laptop.click("#mock-export")
    saved = tmp_path / "progress.json"
    download.value.save_as(saved)
    assert json.loads(saved.read_text())["state"]["session"] == 1

    phone = own(viewport={"width": 390, "height": 844})
    phone.goto(base + "mock-interview/")
    phone.wait_for_selector("#mock-setup")
    assert phone.locator("#mock-progress").inner_text().count("No question graded yet") == 1
    phone.set_input_files("#mock-import-file", str(saved))
    phone.wait_for_selector("#mock-progress-line")
    assert phone.locator("#mock-progress-line").inner_text().startswith("1 question graded over 1 interview")


# --- navigation, the compact cheat sheet, weight, accessibility -----------------------------------


def test_the_compact_cheat_sheet_prints_on_two_a4_pages(site, own, tmp_path):
    base, _, _ = site
    tab = own()
    tab.goto(base + "cheat-sheet-compact/")
    facts = sum(len(page.key_facts[: study.COMPACT_FACTS_PER_PAGE]) for page in QUESTIONS)
    assert tab.locator(".cheat-compact li").count() == facts
    pdf = tab.pdf(format="A4", print_background=False, prefer_css_page_size=True)
    (tmp_path / "cheat-sheet.pdf").write_bytes(pdf)
    pages = int(max(re.findall(rb"/Count (\d+)", pdf), key=int))
    assert 1 <= pages <= 2, f"the compact cheat sheet prints on {pages} pages"


def test_every_question_page_links_its_neighbours_and_home_has_a_plan(site, page):
    base, _, _ = site
    page.goto(base + "questions/data-parallelism/data-parallel-accuracy/")
    footer = page.locator(".md-footer__link")
    assert footer.count() == 2 and all(link.get_attribute("href") for link in footer.all())
    page.goto(base)
    plan = page.locator("article table").filter(has_text="Day").first.locator("tbody tr")
    assert plan.count() == 7
    assert page.locator("form[data-md-component=palette] input").count() == 2  # the dark-mode toggle


def test_first_visit_weight(site, own):
    """At most 600 KB over the wire with compression (gzip of each response, as a server would send it),
    and the search index the page fetches after it has loaded at most 800 KB."""
    base, _, _ = site
    tab = own()
    responses = []
    tab.on("response", lambda response: responses.append(response))
    tab.goto(base, wait_until="networkidle")
    tab.wait_for_timeout(1000)  # the search worker fetches its index after load
    sizes = {}
    for response in responses:
        try:
            sizes[response.url] = len(gzip.compress(response.body(), 6))
        except Exception:  # noqa: BLE001  a redirect has no body
            pass
    index = [size for url, size in sizes.items() if "search_index.json" in url]
    assert len(index) == 1
    # The search index is fetched by a worker after the page has loaded and grows with the site (127 pages:
    # 0.63 MB gzipped); what the page needs to show is held to 600 KB, the index to its own bound.
    total = sum(sizes.values()) - index[0]
    print(f"first visit: {total / 1000:.0f} KB gzipped over {len(sizes) - 1} responses, then the search index "
          f"{index[0] / 1000:.0f} KB")
    assert total <= 600_000, sorted(sizes.items(), key=lambda item: -item[1])[:5]
    assert index[0] <= 800_000, "the search index outgrew its bound: leave more of the pages out of it"


def test_chinese_text_is_marked_and_buttons_are_legible(site, page):
    base, _, _ = site
    page.goto(base + "questions/data-parallelism/data-parallel-accuracy/")
    assert page.locator("article [lang=zh]").count() > 0
    assert page.locator("article [lang=zh]").first.inner_text().strip()[0] >= "\u3400"
    page.goto(base + "mock-interview/")
    page.wait_for_selector("#mock-setup")
    ratios = page.eval_on_selector_all(".md-typeset .md-button", CONTRAST)
    assert ratios and min(ratios) >= 4.5, ratios
    page.hover("#mock-start")
    page.wait_for_timeout(400)
    assert page.eval_on_selector("#mock-start", CONTRAST_ONE) >= 4.5
    page.focus("#mock-start")
    page.wait_for_timeout(400)
    assert page.eval_on_selector("#mock-start", CONTRAST_ONE) >= 4.5
    page.click("#mock-start")
    page.click("#mock-reveal")  # Reveal, now disabled ("Answer shown")
    page.wait_for_timeout(400)  # Material's buttons fade their colours in 125 ms
    assert page.eval_on_selector("#mock-reveal", CONTRAST_ONE) >= 4.5
    assert min(page.eval_on_selector_all(".mock-grade", CONTRAST)) >= 4.5
    page.locator("form[data-md-component=palette] label").first.click()  # the dark scheme
    page.wait_for_function("document.body.getAttribute('data-md-color-scheme') === 'slate'")
    page.wait_for_timeout(400)
    dark = page.eval_on_selector_all(".md-typeset .md-button", CONTRAST)
    assert dark and min(dark) >= 4.5, dark
    page.locator("form[data-md-component=palette] label:visible").first.click()  # back to light for the next tests


CONTRAST_ONE = """e => {
  const rgb = s => (s.match(/[\\d.]+/g) || []).slice(0, 4).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
    .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  let node = e, bg = [255, 255, 255];
  while (node && node.nodeType === 1) {
    const c = rgb(getComputedStyle(node).backgroundColor);
    if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) { bg = c.slice(0, 3); break; }
    node = node.parentElement;
  }
  const fg = rgb(getComputedStyle(e).color).slice(0, 3);
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}"""
CONTRAST = "els => els.filter(e => e.offsetParent).map(" + CONTRAST_ONE + ")"


def test_the_404_page_works_under_a_sub_path(site, own):
    base, _, _ = site
    tab = own()
    failed = []
    tab.on("response", lambda response: response.status >= 400 and "no-such-page" not in response.url and failed.append(response.url))
    response = tab.goto(base + "no-such-page/at/all/")
    assert response.status == 404
    tab.wait_for_load_state("load")
    tab.watch.errors = [e for e in tab.watch.errors if "status of 404" not in e]  # the page itself, as it must
    assert tab.locator("h1").first.inner_text().strip().startswith("404")
    assert failed == [], failed  # its styles and scripts load from the sub-path
    assert tab.evaluate("getComputedStyle(document.querySelector('.md-header')).position") in ("sticky", "fixed")
    home = tab.locator("a.md-header__button.md-logo").evaluate("a => a.href")
    assert home.rstrip("/") == base.rstrip("/"), home


def test_on_a_phone_no_page_scrolls_sideways(site, own):
    """Every page at 390 px: wide tables and code scroll inside themselves, the page never does."""
    base, folder, _ = site
    tab = own(viewport={"width": 390, "height": 844})
    wide = []
    for path in sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*.html")):
        if path == "404.html":
            continue
        tab.goto(base + path.removesuffix("index.html"), wait_until="load")
        overflow = tab.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        if overflow > 0:
            wide.append(f"{path}: {overflow} px")
    assert wide == []


def test_a_lab_downloads_as_a_notebook_and_shares_its_styles(site, page):
    base, folder, statuses = site
    page.goto(base + f"labs/{statuses['lab']}/")
    with page.expect_download() as download:
        page.locator(f"a[href$='{statuses['lab']}.ipynb']").first.click()
    notebook = json.loads(Path(download.value.path()).read_text())
    assert notebook["nbformat"] == 4 and any(cell["cell_type"] == "code" for cell in notebook["cells"])
    assert page.locator("link[href$='assets/notebook.css']").count() == 1  # one file, cached for every lab
    html = (folder / "labs" / statuses["lab"] / "index.html").read_text()
    assert "<style type=\"text/css\">" not in html


# --- the defects of issue 25 (study mode, the plan, search, small ones), each failing before its fix --

PHONE = {"viewport": {"width": 390, "height": 844}, "has_touch": True, "is_mobile": True}
SCREENS = {"phone": PHONE, "desktop": {}}


def question_ids(site) -> list[str]:
    _, folder, _ = site
    return [q["id"] for q in json.loads((folder / study.QUESTIONS_JSON).read_text())["questions"]]


def with_progress(tab, base, state):
    """The mock interview page opened with `state` saved in this browser as an earlier visit left it."""
    tab.goto(base + "mock-interview/")
    tab.wait_for_selector("#mock-setup")
    tab.evaluate("state => localStorage.setItem('accelerate-interview-study-v1', JSON.stringify(state))", state)
    tab.reload()


def progress_from_an_older_site(known: list[str]) -> dict:
    """Progress that names three questions this site no longer has (renamed or removed pages)."""
    gone = ["renamed-question", "removed-question", "older-question"]
    cards = {id: {"box": 2, "last": 1, "grade": "knew", "seen": 1, "date": "2026-01-01"} for id in gone + known[:1]}
    results = [{"id": id, "grade": "knew"} for id in gone[:2] + known[:1]]
    return {"session": 1, "cards": cards, "last": {"session": 1, "date": "2026-01-01", "results": results, "asked": 3},
            "current": {"session": 2, "queue": [gone[2], known[1]], "index": 0, "grades": {}, "seconds": 30}}


@pytest.mark.parametrize("screen", SCREENS)
def test_progress_naming_questions_the_site_no_longer_has_is_trimmed_with_a_note(site, own, screen, tmp_path):
    """Stored or imported progress with unknown ids: a note, the rest kept, the Forget button drawn."""
    base, _, _ = site
    known = question_ids(site)
    tab = own(**SCREENS[screen])
    with_progress(tab, base, progress_from_an_older_site(known))
    tab.wait_for_selector("#mock-setup")
    assert tab.locator(".mock-error").count() == 0, tab.locator(".mock-error").inner_text()
    assert "3 questions from an older version of the site were skipped" in tab.locator("#mock-skipped").inner_text()
    assert tab.locator("#mock-reset").is_visible(), "the Forget button is drawn"
    assert tab.locator("#mock-summary .mock-result").count() == 1  # the known question of the last interview
    state = stored(tab)
    assert set(state["cards"]) == {known[0]} and state["current"]["queue"] == [known[1]]
    tab.click("#mock-resume")  # the interview under way goes on with the question that still exists
    assert tab.locator("#mock-card").get_attribute("data-question") == known[1]

    exported = tmp_path / "older-progress.json"
    older = progress_from_an_older_site(known)
    exported.write_text(json.dumps({"format": "accelerate-interview-study-v1", "state": older}))
    tab.goto(base + "mock-interview/")
    tab.wait_for_selector("#mock-setup")
    tab.evaluate("localStorage.clear()")
    tab.set_input_files("#mock-import-file", str(exported))
    tab.wait_for_selector("#mock-transfer-status:has-text('Imported')")
    assert "3 questions from an older version of the site were skipped" in tab.locator("#mock-transfer-status").inner_text()
    assert set(stored(tab)["cards"]) == {known[0]}


def test_progress_this_site_cannot_read_still_draws_the_forget_button(site, own):
    base, _, _ = site
    tab = own()
    with_progress(tab, base, {"session": "two", "cards": {"x": None, "y": 7}, "last": {"results": None}, "current": 5})
    tab.wait_for_selector("#mock-reset")
    tab.once("dialog", lambda dialog: dialog.accept())
    tab.click("#mock-reset")
    tab.wait_for_selector("#mock-setup")
    assert stored(tab)["cards"] == {}


def grade_box_centre(tab) -> tuple[float, float]:
    box = tab.locator("button[data-grade=knew]").bounding_box()
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


@pytest.mark.parametrize("screen", SCREENS)
def test_a_double_tap_on_a_grade_records_one_grade_and_stays(site, own, screen):
    """On a phone the second tap of a double tap landed on the footer's 'Next' link and left the interview."""
    base, _, _ = site
    tab = own(**SCREENS[screen])
    start_interview(tab, base, count=3)
    tab.click("#mock-reveal")
    x, y = grade_box_centre(tab)
    if screen == "phone":
        tab.touchscreen.tap(x, y)
        tab.touchscreen.tap(x, y)
    else:
        tab.mouse.dblclick(x, y)
    tab.wait_for_timeout(800)  # a navigation the second tap started would have happened by now
    assert tab.url.endswith("/mock-interview/"), f"the double tap left the interview for {tab.url}"
    assert tab.locator("#mock-position").inner_text().startswith("Question 2 of 3")
    assert len(stored(tab)["current"]["grades"]) == 1


def test_n_and_p_do_not_leave_a_running_interview(site, own):
    """mkdocs-material's keyboard shortcuts n and p go to the next and previous page; not mid-interview."""
    base, _, _ = site
    tab = own()
    start_interview(tab, base, count=2)
    for key in ("n", "p", "."):
        tab.keyboard.press(key)
        tab.wait_for_timeout(300)
        assert tab.url.endswith("/mock-interview/") and tab.locator("#mock-card").count() == 1, key
    tab.once("dialog", lambda dialog: dialog.accept())
    tab.click("#mock-stop")
    tab.wait_for_selector("#mock-setup")
    tab.locator("#mock-setup legend").first.click()  # focus on the page, not in a field
    tab.keyboard.press("n")  # outside an interview the shortcut works as on every page
    tab.wait_for_url(re.compile(r"/cheat-sheet/$"))


@pytest.mark.parametrize("how", ["click", "key"])
def test_after_reveal_a_stray_enter_records_no_grade(site, own, how):
    base, _, _ = site
    tab = own()
    start_interview(tab, base, count=2)
    if how == "click":
        tab.click("#mock-reveal")
    else:
        tab.keyboard.press("r")
    tab.wait_for_selector("#mock-grades:not([hidden])")
    focused = tab.evaluate("document.activeElement.closest('#mock-grades, button, a') ? "
                           "document.activeElement.outerHTML.slice(0, 80) : ''")  # fmt: skip
    assert focused == "", f"after Reveal the focus is on {focused}"
    tab.keyboard.press("Enter")
    tab.wait_for_timeout(200)
    assert tab.locator("#mock-position").inner_text().startswith("Question 1 of 2")
    assert stored(tab)["current"]["grades"] == {}


TAP_TARGETS = """() => [...document.querySelectorAll('#mock-app button, #mock-app input, #mock-app select')]
  .filter(e => e.offsetParent !== null || (e.closest('label') && e.closest('label').offsetParent !== null))
  .filter(e => e.type !== 'file')
  .map(e => { const own = e.getBoundingClientRect(), label = e.closest('label');
              const r = label && label.getBoundingClientRect().width > own.width ? label.getBoundingClientRect() : own;
              return [e.id || e.className || e.name || e.tagName, Math.round(r.width), Math.round(r.height)]; })
  .filter(([, w, h]) => w < 24 || h < 24)"""


def test_the_interview_tap_targets_are_at_least_24_px_on_a_phone(site, own):
    base, _, _ = site
    tab = own(**PHONE)
    start_interview(tab, base, count=2)
    small = tab.evaluate(TAP_TARGETS)
    tab.click("#mock-reveal")
    small += tab.evaluate(TAP_TARGETS)
    tab.click("button[data-grade=missed]")
    tab.wait_for_selector("#mock-undo")
    small += tab.evaluate(TAP_TARGETS)
    tab.click("#mock-reveal")
    tab.wait_for_timeout(600)
    tab.click("button[data-grade=knew]")
    tab.wait_for_selector("#mock-summary")
    small += tab.evaluate(TAP_TARGETS)
    assert small == [], f"targets under 24 px: {small}"


def test_due_next_interview_agrees_with_the_due_again_filter(site, own):
    """The progress table counted never-seen questions as due; the filter (rightly) did not."""
    base, _, _ = site
    known = question_ids(site)
    cards = {known[0]: {"box": 1, "last": 5, "grade": "missed", "seen": 1},
             known[1]: {"box": 1, "last": 5, "grade": "partly", "seen": 2},
             known[2]: {"box": 2, "last": 2, "grade": "knew", "seen": 1},  # due: 2 interviews have passed
             known[3]: {"box": 5, "last": 5, "grade": "knew", "seen": 4}}  # fmt: skip
    tab = own()
    with_progress(tab, base, {"session": 5, "cards": cards})
    tab.wait_for_selector("#mock-progress table")
    due = sum(int(cell) for cell in tab.locator("#mock-progress tbody td:last-child").all_inner_texts())
    for box in tab.locator("input[name=topic], input[name=difficulty]").all():
        box.set_checked(True)
    tab.check("#mock-due-only")
    matching = int(tab.locator("#mock-matching").inner_text().split()[0])
    assert due == matching == 3, f"'Due next interview' adds up to {due}, the due-again filter finds {matching}"


def test_the_week_plan_on_the_home_page_links_every_question_once(site, page):
    base, folder, _ = site
    page.goto(base)
    plan = page.locator("article table").filter(has_text="Day").first
    linked = [urlsplit(href).path for href in plan.locator("a").evaluate_all("links => links.map(a => a.href)")]
    questions = [urlsplit(base).path + page_url(q.path) for q in QUESTIONS]
    assert sorted(path for path in linked if path in questions) == sorted(questions), (
        f"missing: {sorted(set(questions) - set(linked))}")
    assert plan.locator("tbody tr").count() == 7


def test_search_puts_the_gradient_accumulation_page_first(site, page):
    base, _, _ = site
    page.goto(base)
    first = search(page, "gradient accumulation").first.get_attribute("href")
    assert "training-mechanics/gradient-accumulation/" in first, first


FOLDED = re.compile(r"<details(?![^>]*\bopen)[^>]*>\s*<summary>.*?</summary>(.*?)</details>", re.S)


def folded_texts(html_text: str) -> list[str]:
    """The first 60 characters of text of each folded block's body (what a reader opens on purpose)."""
    texts = []
    for body in FOLDED.findall(html_text):
        text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body))).strip()
        if len(text) >= 30:
            texts.append(text[:60])
    return texts


def test_search_previews_hide_every_folded_answer(site, page):
    """The follow-up answers (??? question) were indexed and printed in the previews."""
    base, folder, _ = site
    index = json.loads((folder / "search" / "search_index.json").read_text())
    leaked = []
    for question in QUESTIONS:
        url = page_url(question.path)
        indexed = re.sub(r"\s+", " ", html.unescape(" ".join(
            re.sub(r"<[^>]+>", " ", doc["text"]) for doc in index["docs"] if doc["location"].startswith(url))))  # fmt: skip
        built = (folder / url / "index.html").read_text()
        article = built.split("<article", 1)[1].split("</article>", 1)[0]
        unfolded = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", FOLDED.sub("", article))))
        leaked += [f"{question.slug}: {text}" for text in folded_texts(article)
                   if text in indexed and text not in unfolded]  # (the same words said outside a fold may be found)
    assert leaked == [], f"{len(leaked)} folded blocks are in the search index, e.g. {leaked[:3]}"
    target = (folder / "questions/training-mechanics/gradient-accumulation/index.html").read_text()
    follow_ups = folded_texts(target.split("Follow-up questions", 1)[1])
    page.goto(base)
    search(page, "gradient accumulation")
    shown = re.sub(r"\s+", " ", page.locator(".md-search-result").inner_text())
    assert follow_ups and not [text for text in follow_ups if text[:40] in shown]


def test_what_the_home_page_says_of_the_printed_cheat_sheet_is_true(site, own):
    """The home page called the full cheat sheet 'one printable page'; it prints on about 40 A4 pages."""
    base, _, _ = site
    tab = own()
    tab.goto(base)
    said = tab.locator("article li, article p").filter(has=tab.locator("a[href$='cheat-sheet/']")).all_inner_texts()
    claims = re.findall(r"\b(one|two|three|\d+)[ -](?:printable|printed|A4) pages?", " ".join(said))
    tab.goto(base + "cheat-sheet/")
    pdf = tab.pdf(format="A4", print_background=False, prefer_css_page_size=True)
    printed = int(max(re.findall(rb"/Count (\d+)", pdf), key=int))
    words = {"one": 1, "two": 2, "three": 3}
    assert not [claim for claim in claims if (words.get(claim) or int(claim)) != printed], (
        f"the home page says {claims} printed page(s); the cheat sheet prints on {printed}")


def test_a_lab_page_puts_its_title_above_the_run_box(site, page):
    base, _, statuses = site
    page.goto(base + f"labs/{statuses['lab']}/")
    order = page.evaluate("""() => { const h1 = document.querySelector('article h1'),
        box = document.querySelector('article .admonition.info');
        return h1.compareDocumentPosition(box) & Node.DOCUMENT_POSITION_FOLLOWING ? 'title first' : 'run box first'; }""")
    assert order == "title first"
