"""The site builds strictly, requests nothing from other hosts, and shows evidence or the command for it."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from verify.pages import load_page
from verify.paths import ROOT

EXTERNAL = re.compile(
    r"""<(?:script|img|iframe|source|audio|video)[^>]+src=["']?(?:https?:)?//"""
    r"""|<link(?![^>]*rel=["']?canonical)[^>]+href=["']?(?:https?:)?//[^>]*>"""  # a canonical link is no request
    r"""|url\(\s*["']?(?:https?:)?//|@import\s+["']?(?:https?:)?//""",
    re.I,
)


def text_of(html: str) -> str:
    """What a reader sees: tags dropped (code highlighting splits commands into spans)."""
    return re.sub(r"<[^>]+>", "", html).replace("&#39;", "'").replace("&quot;", '"').replace("&amp;", "&")


def build(site_dir: Path, evidence_dir: Path, labs_dir: Path | None = None, reference_dir: Path | None = None,
          **env_vars) -> subprocess.CompletedProcess:
    """A strict build from this evidence, these executed labs and this reference evidence (none unless given)."""
    labs_dir = labs_dir or evidence_dir / "no-executed-labs"
    reference_dir = reference_dir or evidence_dir / "no-reference-evidence"
    env = dict(os.environ, VERIFY_EVIDENCE_DIR=str(evidence_dir), VERIFY_LABS_DIR=str(labs_dir),
               VERIFY_REFERENCE_DIR=str(reference_dir), NO_MKDOCS_2_WARNING="1", **env_vars)  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="module")
def site_without_evidence(tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    result = build(site, tmp_path_factory.mktemp("no-evidence"))
    assert result.returncode == 0, result.stdout + result.stderr
    return site


def test_built_site_requests_nothing_from_other_hosts(site_without_evidence):
    offenders = []
    for path in site_without_evidence.rglob("*"):
        if path.suffix in (".html", ".css", ".js"):
            for match in EXTERNAL.finditer(path.read_text(errors="replace")):
                offenders.append(f"{path.relative_to(site_without_evidence)}: {match.group(0)[:80]}")
    assert offenders == []


def test_without_evidence_a_page_shows_the_command_that_produces_it(site_without_evidence):
    page = text_of((site_without_evidence / "questions" / "data-parallelism" / "data-parallel-accuracy" / "index.html").read_text())
    assert "No evidence from this machine yet" in page
    assert "python -m pytest verify -k data-parallel-accuracy" in page
    assert "snippets/data-parallelism/ddp_gradients_match_full_batch.py" in page  # the proof's code is on the page


def test_the_30_second_answer_is_folded(site_without_evidence):
    page = (site_without_evidence / "questions" / "data-parallelism" / "data-parallel-accuracy" / "index.html").read_text()
    assert re.search(r"<details class=\"success\" data-search-exclude>\s*<summary>30-second answer</summary>", page)


def test_search_index_segments_chinese_words(site_without_evidence):
    index = json.loads((site_without_evidence / "search" / "search_index.json").read_text())
    assert index["config"]["lang"] == ["en", "zh"]
    text = " ".join(doc["text"] + doc["title"] for doc in index["docs"])
    assert "\u200b" in text  # jieba's word boundaries, which the separator splits on
    assert "数据并行" in text.replace("\u200b", "")


def test_with_evidence_a_page_shows_measured_values_and_versions(tmp_path):
    # The page shows evidence only for the claims it makes now: the statement must be the page's own.
    proof = load_page(ROOT / "docs" / "questions" / "data-parallelism" / "data-parallel-accuracy.md").proofs[0]
    evidence_dir = tmp_path / "evidence"
    evidence_dir.mkdir()
    fake = {
        "page": "data-parallel-accuracy", "snippet": "ddp_gradients_match_full_batch.py",
        "date": "2026-01-02T03:04:05+00:00",
        "versions": {"python": "3.11.7", "torch": "9.9.9", "accelerate": "8.8.8", "transformers": "7.7.7"},
        "world_size": 2, "backend": "gloo", "distributed_type": "MULTI_CPU", "device_per_rank": {"0": "cpu"},
        "status": "finished", "snippet_seconds": 0.1,
        # every claim the proof makes, each held, the first with the value the page must show
        "claims": [{"id": claim_id, "statement": claim.says, "passed": True, "reason": "",
                    "reports": [{"rank": 0, "measured": 1.25e-08, "control": 0.5, "op": "<=", "bound": 1e-06,
                                 "details": {}}]} for claim_id, claim in proof.claims.items()],
    }  # fmt: skip
    from verify import evidence

    evidence.write(fake, evidence_dir)
    result = build(tmp_path / "site", evidence_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    page = text_of((tmp_path / "site" / "questions" / "data-parallelism" / "data-parallel-accuracy" / "index.html").read_text())
    assert "Evidence: every claim held" in page
    assert "1.25e-08" in page and "torch 9.9.9" in page and "accelerate 8.8.8" in page


def test_study_mode_is_built(site_without_evidence):
    """The mock interview's questions are generated; without evidence a figure shows its command."""
    data = json.loads((site_without_evidence / "assets" / "study" / "questions.json").read_text())
    assert len(data["questions"]) >= 10 and all(q["answer_html"] for q in data["questions"])
    assert not (site_without_evidence / "assets" / "figures").exists()
    page = text_of((site_without_evidence / "questions" / "model-parallelism" / "pipeline-parallelism" / "index.html").read_text())
    assert "Figure: " in page and "python -m pytest verify -k pipeline-parallelism && mkdocs build" in page
    home = (site_without_evidence / "index.html").read_text()
    statuses = re.findall(r'<tr [^>]*data-status="([a-z-]+)"', home)
    assert len(statuses) == len(data["questions"]) and set(statuses) <= {"no-evidence-yet", "gpu-ready-not-yet-run-on-a-gpu", "sourced-only"}
    assert (site_without_evidence / "mock-interview" / "index.html").exists()
    assert (site_without_evidence / "cheat-sheet" / "index.html").exists()


# The real-browser checks (search in English and Chinese, and study mode) are in tests/test_browser.py.


def test_a_lab_page_builds_from_its_executed_copy(tmp_path):
    # After `pytest verify` ran the labs, the site renders their executed notebooks (outside docs/).
    import jupytext

    executed = tmp_path / "labs"
    executed.mkdir()
    source = sorted((ROOT / "docs" / "labs").glob("lab*.py"))[0]
    notebook = jupytext.read(source)
    notebook.metadata["verify"] = {"date": "2026-11-30", "seconds": 1.0, "status": "finished"}
    jupytext.write(notebook, executed / f"{source.stem}.ipynb")
    site = tmp_path / "site"
    result = build(site, tmp_path / "evidence", executed)
    assert result.returncode == 0, result.stdout + result.stderr
    page = (site / "labs" / source.stem / "index.html").read_text()
    assert "Outputs of the latest" in text_of(page)


def test_the_committed_reference_evidence_speaks_for_the_pages_claims():
    """What a fresh clone shows: each reference file names its machine and matches its page's claims
    (`python -m verify.website.reference --check` also lists the proofs it lacks)."""
    from verify import evidence, labs
    from verify.website import reference
    from verify.pages import all_proofs, load_pages
    from verify.paths import REFERENCE_DIR

    proofs = {evidence.path_of(p.page, p.snippet, Path()).as_posix(): p for p in all_proofs(load_pages()) + labs.load_labs()[0]}
    assert not list(REFERENCE_DIR.glob("*.json")), "evidence is kept per page: reference-evidence/<page>/<snippet>.json"
    for name, path in reference.evidence_files(REFERENCE_DIR).items():
        found = json.loads(path.read_text())
        assert name in proofs, f"{name}: no page declares this proof any more"
        assert found.get("machine"), f"{name}: says nothing of the machine it was measured on"
        assert evidence.matches_claims(found, proofs[name].claims), f"{name}: predates its page's claims"
    assert all("predates" not in problem for problem in reference.check())


def test_a_second_build_with_nothing_changed_redraws_no_figure(tmp_path, monkeypatch):
    """Figures are cached by the hash of what they are drawn from (.verify/cache/figures/)."""
    from verify.website import figures
    from verify.pages import load_pages

    monkeypatch.setattr(figures, "CACHE_DIR", tmp_path)
    drawn = []
    draw = figures.draw
    monkeypatch.setattr(figures, "draw", lambda *args: drawn.append(args[0]["id"]) or draw(*args))
    first = figures.render_all(load_pages())
    assert first and len(drawn) == len(first)
    drawn.clear()
    assert figures.render_all(load_pages()) == first and drawn == []


def test_the_search_index_is_given_no_excluded_element():
    """The search plugin is handed the page without its `data-search-exclude` elements, nested ones whole
    (the plugin itself would stop skipping at the first nested closing tag of the same name)."""
    from verify.website.search_exclude import without_excluded

    page = ('<p>kept</p><div class="evidence-box" data-search-exclude><div>a</div><p>still inside</p></div>'
            '<div data-search-exclude="code"><pre><span>x</span></pre></div><details class="success" '
            "data-search-exclude><summary>30-second answer</summary><details><p>follow-up</p></details><p>more</p>"
            "</details><p>after</p><br data-search-excluded>")  # fmt: skip
    assert without_excluded(page) == "<p>kept</p><p>after</p><br data-search-excluded>"


def test_the_sitemap_and_404_have_an_address_when_built_the_readme_way():
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!ENV", lambda loader, node: loader.construct_sequence(node))
    Loader.add_multi_constructor("tag:yaml.org,2002:python/name:", lambda loader, suffix, node: suffix)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)
    assert config["site_url"][0] == "SITE_URL" and config["site_url"][1].startswith("http://127.0.0.1:8000/")
