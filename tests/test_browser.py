"""The built site in a real browser (Debian's chromium driven by Playwright): search, the question
table's filters, a whole mock interview, the figures, every page without console errors or requests to
other hosts, and a phone-sized screen.

The site is built with made-up evidence for its proofs (one page left without, one failing), so the
figures are drawn and every proof status shows. One browser, one context, one local http server.
Skipped where chromium or playwright is missing, except under REQUIRE_BROWSER_TESTS=1 (CI sets it).
"""

import http.server
import importlib.util
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
from verify import figures, study
from verify.pages import DOCS_DIR, load_pages, question_pages

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


def made_up_evidence(evidence_dir: Path) -> dict:
    """Evidence for every proof that runs without a GPU: the first question page gets none, the second
    fails, the rest pass. Each claim's details hold whatever its page's figures read. Returns the
    status each page should show."""
    wanted: dict = {}  # claim id -> {detail name: value}
    for page in QUESTIONS:
        for spec in figures.declared(page):
            for item in spec["data"]:
                details = wanted.setdefault(item.get("claim") or spec.get("claim"), {})
                for number, key in enumerate(sum(([k] if not isinstance(k, list) else k
                                                  for k in (item.get("value"), item.get("x"), item.get("y"))), [])):
                    if isinstance(key, str) and key.startswith("details."):
                        name = key.split(".")[1]
                        whole = isinstance(item.get("y"), str) and item["y"] == key
                        details[name] = {"1": 0.5, "2": 0.33, "4": 0.2} if whole else float(number + 2)
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
                            "reports": [{"rank": rank, "measured": 0.0 if rank else 1.25e-08, "control": 0.5,
                                         "op": "<=", "bound": 1e-06, "details": wanted.get(claim, {})}
                                        for rank in (0, 1)]}
                           for claim, declared in proof.claims.items()],
            }  # fmt: skip
            (evidence_dir / f"{Path(proof.snippet).stem}.json").write_text(json.dumps(record))
    return {page.slug: "no evidence yet" if index == 0 else "failed" if index == 1 else None
            for index, page in enumerate(proven)}  # fmt: skip


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """(base URL, site folder, expected statuses): the site built with made-up evidence, served over http."""
    evidence_dir = tmp_path_factory.mktemp("made-up-evidence")
    statuses = made_up_evidence(evidence_dir)
    folder = tmp_path_factory.mktemp("site")
    result = build(folder, evidence_dir)
    assert result.returncode == 0, result.stdout + result.stderr

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):
            pass  # a browser that drops a connection it no longer needs is no failure

    server = Server(("127.0.0.1", 0), partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/", folder, statuses
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
        context = chromium.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
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
        wanted = sorted(p.title for p in QUESTIONS if statuses.get(p.slug) == status)
        assert titles == wanted, status
    page.select_option("#qi-status", "passed")
    assert len(shown()) > 0

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
    images = {}
    for path in sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*.html")):
        tab.goto(base + path.removesuffix("index.html"), wait_until="load")
        images[path] = tab.eval_on_selector_all(
            "figure.study-figure img",
            "imgs => imgs.map(img => ({src: img.getAttribute('src'), alt: img.alt, loaded: img.complete && img.naturalWidth > 0}))",
        )
    tab.close()
    errors, foreign = watch.errors[:], watch.foreign[:]
    watch.errors.clear()
    watch.foreign.clear()
    return images, errors, foreign


def test_every_page_loads_without_console_errors_or_requests_to_other_hosts(tour):
    images, errors, foreign = tour
    assert len(images) > len(QUESTIONS)
    assert errors == []
    assert foreign == []


def test_figures_load_with_alt_text(tour):
    images, _, _ = tour
    drawn = 0
    for question in QUESTIONS:
        path = question.path.relative_to(DOCS_DIR).with_suffix("").as_posix() + "/index.html"
        for spec in figures.declared(question):
            found = [image for image in images[path] if image["src"].endswith(f"/{spec['id']}.svg")]
            assert len(found) == 1, f"{question.slug}: figure {spec['id']} is not on the page"
            assert found[0]["alt"].startswith(spec["alt"].strip().rstrip(".")[:40]) and "Values:" in found[0]["alt"]
            assert found[0]["loaded"], f"{question.slug}: figure {spec['id']} did not load"
            drawn += 1
    assert drawn >= 6


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
