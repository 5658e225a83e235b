"""The figures on a phone, in a real browser (Debian's chromium driven by Playwright), drawn from the
committed reference evidence as a fresh clone's site shows them: on every page with a figure, at
390 x 844 CSS px, the smallest text of each figure as rendered, no sideways scrolling, alt text with the
values; the zoom opens the figure in an overlay on the same page and Esc closes it; the dark scheme
inverts the figure's ink. Screenshots of a phone go to FIGURE_SCREENSHOTS when it names a folder;
FIGURE_SITE names a site already built that way (VERIFY_EVIDENCE_DIR empty) instead of building one.

Skipped where chromium or playwright is missing, like tests/test_browser.py.
"""

import http.server
import os
import re
import subprocess
import threading
from functools import partial
from pathlib import Path

import pytest

from tests.test_browser import AVAILABLE, ARGS, CHROMIUM, Watch
from tests.test_site import build
from verify.pages import load_pages, question_pages
from verify.paths import DOCS_DIR, REFERENCE_EVIDENCE_DIR
from verify.website import figures

pytestmark = pytest.mark.skipif(
    not AVAILABLE and os.environ.get("REQUIRE_BROWSER_TESTS") != "1",
    reason="needs Debian's chromium (apt-get install chromium) and `pip install playwright`; .ci/run installs both",
)
PHONE = {"width": 390, "height": 844}
SMALLEST_CSS_PX = 11
FIGURE_PAGES = [page for page in question_pages(load_pages()) if figures.declared(page)]
SHOTS = os.environ.get("FIGURE_SCREENSHOTS")


def url_of(page) -> str:
    return page.path.relative_to(DOCS_DIR).with_suffix("").as_posix() + "/"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built from the reference evidence alone (no evidence of this machine), served on 127.0.0.1."""
    folder = Path(os.environ["FIGURE_SITE"]) if os.environ.get("FIGURE_SITE") else tmp_path_factory.mktemp("site")
    try:
        result = (subprocess.CompletedProcess([], 0, "", "") if os.environ.get("FIGURE_SITE")  # built already, the same way
                  else build(folder, tmp_path_factory.mktemp("no-evidence"), reference_dir=REFERENCE_EVIDENCE_DIR))
    except subprocess.TimeoutExpired:  # a loaded machine: tests/test_site.py's build allows 300 s
        pytest.skip("the site build took over 300 s on this machine")
    assert result.returncode == 0, result.stdout + result.stderr

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/", folder
    server.shutdown()


@pytest.fixture(scope="module")
def phone(site):
    """A phone-sized tab (light and dark contexts), checked for console errors and foreign requests."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        tabs = {}
        for scheme in ("light", "dark"):
            context = chromium.new_context(viewport=PHONE, device_scale_factor=2, color_scheme=scheme, service_workers="block")
            context.set_default_timeout(15000)
            watch = Watch(context)
            tab = context.new_page()
            tab.watch = watch
            tabs[scheme] = tab
        yield tabs
        chromium.close()


MEASURE = """async () => {
  const found = [];
  for (const img of document.querySelectorAll('figure.study-figure img')) {
    if (!img.complete) await new Promise(done => img.addEventListener('load', done, {once: true}));
    const svg = await (await fetch(img.src)).text();
    const box = /viewBox="[\\d.]+ [\\d.]+ ([\\d.]+) /.exec(svg);
    const sizes = [...svg.matchAll(/font(?:-size)?:\\s*(?:[a-z]+ )*([\\d.]+)px/g)].map(m => parseFloat(m[1]));
    const rect = img.getBoundingClientRect();
    found.push({src: img.getAttribute('src'), alt: img.alt, bytes: svg.length, width: rect.width, right: rect.right,
                smallest: Math.min(...sizes) * rect.width / parseFloat(box[1]), loaded: img.naturalWidth > 0});
  }
  return {figures: found, overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth};
}"""


def test_every_figure_reads_on_a_phone_without_sideways_scrolling(site, phone):
    base, _ = site
    tab = phone["light"]
    measured, problems = {}, []
    for page in FIGURE_PAGES:
        tab.goto(base + url_of(page), wait_until="load")
        found = tab.evaluate(MEASURE)
        ids = [spec["id"] for spec in figures.declared(page)]
        drawn = {figure["src"].rsplit("/", 1)[-1].removesuffix(".svg"): figure for figure in found["figures"]}
        if found["overflow"] > 0:
            problems.append(f"{page.slug}: scrolls sideways by {found['overflow']} px")
        for figure_id in ids:
            figure = drawn.get(figure_id)
            if figure is None:
                problems.append(f"{page.slug}: figure {figure_id} is not drawn (its place: missing evidence or a failed claim)")
                continue
            measured[figure_id] = figure["smallest"]
            if not figure["loaded"]:
                problems.append(f"{page.slug}: {figure_id} did not load")
            if figure["smallest"] < SMALLEST_CSS_PX:
                problems.append(f"{page.slug}: {figure_id}'s smallest text is {figure['smallest']:.1f} CSS px")
            if figure["right"] > PHONE["width"] + 0.5:
                problems.append(f"{page.slug}: {figure_id} reaches past the screen ({figure['right']:.0f} px)")
            if "Values:" not in figure["alt"]:
                problems.append(f"{page.slug}: {figure_id}'s alt text names no values")
        if sum(figure["bytes"] for figure in found["figures"]) > 150_000 * max(1, len(found["figures"])) / 3:
            problems.append(f"{page.slug}: its figures weigh more than 50 KB each on average")
    tab.watch.check()
    assert not problems, "\n".join(problems)
    assert len(measured) >= 40
    print(f"\n{len(measured)} figures on {len(FIGURE_PAGES)} pages; smallest text "
          f"{min(measured.values()):.1f} to {max(measured.values()):.1f} CSS px at 390 px")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_figure_opens_in_an_overlay_on_the_same_page_and_esc_closes_it(site, phone, scheme):
    base, _ = site
    tab = phone[scheme]
    page = next(page for page in FIGURE_PAGES if page.slug == "pipeline-schedules")
    tab.goto(base + url_of(page), wait_until="load")
    address = tab.url
    figure = tab.locator("figure.study-figure a.study-figure-zoom").first
    figure.scroll_into_view_if_needed()
    inline = figure.locator("img").bounding_box()
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(Path(SHOTS) / f"phone-{scheme}-figure-in-page.png"))
    figure.click()
    overlay = tab.locator("dialog.study-figure-overlay")
    overlay.wait_for(state="visible")
    assert tab.url == address, "the zoom navigated away"
    enlarged = overlay.locator("img").bounding_box()
    assert enlarged["width"] >= 1.5 * inline["width"], (enlarged, inline)
    assert tab.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
    assert overlay.locator("img").get_attribute("alt") == figure.locator("img").get_attribute("alt")
    filtered = tab.evaluate("getComputedStyle(document.querySelector('dialog.study-figure-overlay img')).filter")
    assert ("invert" in filtered) == (scheme == "dark"), filtered
    if SHOTS:
        tab.screenshot(path=str(Path(SHOTS) / f"phone-{scheme}-figure-enlarged.png"))
    tab.keyboard.press("Escape")
    overlay.wait_for(state="hidden")
    assert tab.url == address
    figure.click()  # opens again, and the close button closes it too
    overlay.wait_for(state="visible")
    overlay.locator(".study-figure-close").click()
    overlay.wait_for(state="hidden")
    tab.watch.check()


def test_figure_text_in_the_svg_is_text_not_paths(site):
    """Text kept as text (svg.fonttype none) is what makes the figures small and their size measurable."""
    _, folder = site
    drawn = sorted((folder / figures.FIGURES_DIR).glob("*.svg"))
    assert len(drawn) >= 40
    for path in drawn:
        svg = path.read_text(encoding="utf-8")
        assert "<text" in svg and not re.search(r"<defs>\s*<path id=\"DejaVu", svg), path.name
