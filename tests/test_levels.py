"""Evidence levels (data/levels-spec.md): the schema of `sources:` and of excerpts, the quote check, the
Mechanism markers and the backlog of pages not labelled yet (which may only shrink)."""

from __future__ import annotations

import textwrap
import time

import pytest
from pydantic import ValidationError

from verify import levels, schema, sources
from verify.pages import load_page, load_pages, question_pages
from verify.paths import DOCS_DIR, EXCERPTS_DIR
from verify.website import levels as site_levels

PAGES = [page for page in load_pages() if not page.error]


def write_page(tmp_path, front: str, body: str, name: str = "page.md"):
    path = tmp_path / name
    path.write_text(f"---\n{textwrap.dedent(front).strip()}\n---\n\n{textwrap.dedent(body).strip()}\n", encoding="utf-8")
    return load_page(path)


PROOF = """
proofs:
  - snippet: some_proof.py
    claims:
      ring_matches:
        says: the model matches
        level: modelled
      grads_match: the gradients match
  - snippet: gpu_proof.py
    requires: cuda
    claims:
      nccl_fast: NCCL is fast
sources:
  reverse_comment:
    quote: "reverse list of buckets"
    in: installed:torch/nn/parallel/distributed.py
    backs: DDP reverses its buckets.
"""


# --- the schema ---------------------------------------------------------------------------------


def source(**changes):
    entry = {"quote": "x", "in": "installed:torch/nn/parallel/distributed.py", "backs": "y", **changes}
    return schema.PageMeta.model_validate({"sources": {"a_source": entry}})


@pytest.mark.parametrize("where", ["excerpt:nccl-env-vars", "installed:torch/distributed/distributed_c10d.py",
                                   "installed:accelerate/state.py", "installed:six.py"])  # fmt: skip
def test_a_source_is_an_excerpt_or_an_installed_file(where):
    source(**{"in": where})


@pytest.mark.parametrize("where", ["nccl-env-vars", "excerpt:", "installed:/etc/passwd", "installed:../x/y.py",
                                   "installed:torch/", "url:https://x", "excerpt:../x"])  # fmt: skip
def test_a_source_elsewhere_is_refused(where):
    with pytest.raises(ValidationError):
        source(**{"in": where})


@pytest.mark.parametrize("missing", ["quote", "in", "backs"])
def test_a_source_has_quote_in_and_backs(missing):
    entry = {"quote": "x", "in": "excerpt:a", "backs": "y"}
    del entry[missing]
    with pytest.raises(ValidationError):
        schema.PageMeta.model_validate({"sources": {"a_source": entry}})


@pytest.mark.parametrize("source_id", ["NCCL_algo", "1st", "a-b", "_x"])
def test_a_source_id_is_lower_snake(source_id):
    with pytest.raises(ValidationError, match="lower_snake"):
        schema.PageMeta.model_validate({"sources": {source_id: {"quote": "x", "in": "excerpt:a", "backs": "y"}}})


def test_a_quote_of_dots_alone_is_refused():
    with pytest.raises(ValidationError, match="words to find"):
        source(quote=" ... ")


def test_a_bad_source_fails_its_page_naming_the_line(tmp_path):
    page = write_page(tmp_path, "sources:\n  a_source:\n    quote: x\n    in: somewhere\n    backs: y", "# T")
    assert page.error and "page.md:5: sources.a_source.in: Value error, 'somewhere' is neither excerpt:NAME" in page.error


def excerpt(tmp_path, front: str, text: str = "The words.", name: str = "an-excerpt"):
    (tmp_path / f"{name}.md").write_text(f"---\n{textwrap.dedent(front).strip()}\n---\n{text}\n", encoding="utf-8")
    return tmp_path


GOOD_EXCERPT = """
title: NCCL environment variables
url: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
at: "NCCL 2.21.5 docs"
retrieved: 2026-12-01
"""


def test_an_excerpt_has_title_url_version_and_date(tmp_path):
    found = sources.load_excerpt("an-excerpt", excerpt(tmp_path, GOOD_EXCERPT, "line one\n\nline two"))
    assert found.meta.at == "NCCL 2.21.5 docs" and found.text.strip() == "line one\n\nline two"


@pytest.mark.parametrize("missing", ["url", "at", "title", "retrieved"])
def test_an_excerpt_without_url_or_version_is_refused(tmp_path, missing):
    front = "\n".join(line for line in GOOD_EXCERPT.strip().splitlines() if not line.startswith(missing + ":"))
    with pytest.raises(sources.SourceError, match=missing):
        sources.load_excerpt("an-excerpt", excerpt(tmp_path, front))


def test_an_excerpt_url_must_be_a_url(tmp_path):
    with pytest.raises(sources.SourceError, match="url"):
        sources.load_excerpt("an-excerpt", excerpt(tmp_path, GOOD_EXCERPT.replace("https://", "")))


# --- the quote check ----------------------------------------------------------------------------


def test_whitespace_is_normalised_and_dots_leave_words_out():
    text = "def f():\n    # reverse list of buckets because we want to approximate\n    return x"
    assert sources.quote_found("reverse list  of\nbuckets", text)
    assert sources.quote_found("def f(): ... return x", text)
    assert not sources.quote_found("return x ... def f()", text)  # the parts in their order
    assert not sources.quote_found("reverse the list of buckets", text)


def test_an_installed_quote_is_read_from_the_installed_file(tmp_path):
    page = write_page(tmp_path, PROOF, "# T")
    assert sources.quote_problem(page.path, "reverse_comment", page.sources["reverse_comment"]) is None
    changed = {**page.sources["reverse_comment"], "quote": "buckets follow the parameter order"}
    problem = sources.quote_problem(page.path, "reverse_comment", changed)
    assert all(part in problem for part in (str(page.path), "reverse_comment", "buckets follow the parameter order",
                                             "torch/nn/parallel/distributed.py"))  # fmt: skip


def test_an_installed_file_that_does_not_exist_fails_by_name(tmp_path):
    problem = sources.quote_problem(tmp_path / "p.md", "s", {"quote": "x", "in": "installed:torch/no_such_file.py"})
    assert "no_such_file.py" in problem and "'s'" in problem
    problem = sources.quote_problem(tmp_path / "p.md", "s", {"quote": "x", "in": "installed:no_such_package/x.py"})
    assert "no_such_package" in problem


def test_an_excerpt_quote_is_read_from_the_excerpt(tmp_path):
    folder = excerpt(tmp_path, GOOD_EXCERPT, "NCCL_ALGO\n\nRing, Tree")
    assert sources.quote_problem(tmp_path / "p.md", "s", {"quote": "NCCL_ALGO Ring, Tree", "in": "excerpt:an-excerpt"},
                                 folder) is None  # fmt: skip
    problem = sources.quote_problem(tmp_path / "p.md", "s", {"quote": "CollNet", "in": "excerpt:an-excerpt"}, folder)
    assert "CollNet" in problem and "an-excerpt.md" in problem
    problem = sources.quote_problem(tmp_path / "p.md", "s", {"quote": "x", "in": "excerpt:missing"}, folder)
    assert "missing" in problem and "does not exist" in problem


def test_every_quote_of_the_site_is_checked_in_under_5_seconds():
    """The same check `pytest verify` runs per quote, over the whole site, timed (data/levels-spec.md)."""
    start = time.perf_counter()
    problems = [sources.quote_problem(page.path, source_id, entry)
                for page in load_pages() for source_id, entry in page.sources.items()]  # fmt: skip
    assert time.perf_counter() - start < 5
    assert not [problem for problem in problems if problem]


def test_each_cited_excerpt_exists_and_every_excerpt_is_cited():
    cited = sources.cited_excerpts(PAGES)
    missing = {name: by for name, by in cited.items() if not sources.excerpt_path(name).is_file()}
    assert not missing, f"cited excerpts missing from {EXCERPTS_DIR}: {missing}"
    uncited = sorted(set(sources.excerpt_names()) - set(cited))
    assert not uncited, f"excerpts no page cites (cite or remove them): {uncited}"
    for name in sources.excerpt_names():
        sources.load_excerpt(name)  # its front matter: title, url, at, retrieved


# --- the markers --------------------------------------------------------------------------------


def test_levels_of_claims_and_sources(tmp_path):
    page = write_page(tmp_path, PROOF, "# T")
    assert levels.id_levels(page) == {"ring_matches": "modelled", "grads_match": "measured",
                                      "nccl_fast": "gpu-ready", "reverse_comment": "sourced"}  # fmt: skip


BODY = """
# T

## Mechanism

First paragraph.
<!-- evidence: measured grads_match -->

* a list item
* another item

<!-- evidence: sourced reverse_comment, modelled ring_matches -->

```python
code needs no label
```

### A heading needs no label

A paragraph nobody labelled.

| a | table |
|---|---|

<!-- evidence: gpu-ready nccl_fast -->

## Proof

Outside Mechanism: no label needed.
"""


def test_markers_label_the_block_above_and_a_list_is_one_block(tmp_path):
    page = write_page(tmp_path, PROOF, BODY)
    blocks = [block for block in levels.mechanism_blocks(*levels.body_and_first_line(page.path))[0] if block.statement]
    assert [(block.lines[0], block.marker.pairs if block.marker else None) for block in blocks] == [
        ("First paragraph.", (("measured", "grads_match"),)),
        ("* a list item", (("sourced", "reverse_comment"), ("modelled", "ring_matches"))),
        ("A paragraph nobody labelled.", None),
        ("| a | table |", (("gpu-ready", "nccl_fast"),)),
    ]
    assert [block.lines[0] for block in levels.unlabelled(page)] == ["A paragraph nobody labelled."]
    assert levels.problems(page) == []


@pytest.mark.parametrize(
    "marker, problem",
    [
        ("<!-- evidence: measured no_such_claim -->", "'no_such_claim' is neither a claim nor a source"),
        ("<!-- evidence: measured ring_matches -->", "'ring_matches' is modelled, not measured"),
        ("<!-- evidence: sourced grads_match -->", "'grads_match' is measured, not sourced"),
        ("<!-- evidence: measured nccl_fast -->", "'nccl_fast' is gpu-ready, not measured"),
        ("<!-- evidence: proven grads_match -->", "'proven' is not a level"),
        ("<!-- evidence: grads_match -->", "is not 'LEVEL ID'"),
        ("<!-- evidence: -->", "names no level and id"),
    ],
)
def test_a_wrong_marker_names_the_page_and_line(tmp_path, marker, problem):
    page = write_page(tmp_path, PROOF, f"# T\n\n## Mechanism\n\nA paragraph.\n{marker}\n")
    found = levels.problems(page)
    assert len(found) == 1 and problem in found[0] and f"{page.path}:" in found[0], found


def test_a_marker_that_labels_nothing_is_a_problem(tmp_path):
    page = write_page(tmp_path, PROOF, "# T\n\n## Mechanism\n\nA paragraph.\n<!-- evidence: measured grads_match -->\n\n"
                                       "<!-- evidence: measured grads_match -->\n")  # fmt: skip
    assert any("follows no unlabelled paragraph" in problem for problem in levels.problems(page))


def test_a_key_fact_naming_a_source_id_must_find_it(tmp_path):
    front = PROOF + "key_facts:\n  - fact: DDP reverses its buckets.\n    source: no_such_source\n"
    assert any("no_such_source" in problem for problem in levels.problems(write_page(tmp_path, front, "# T")))
    legacy = PROOF + "key_facts:\n  - fact: x\n    source: https://example.org/doc\n  - fact: y\n    source: torch/x.py\n"
    assert levels.problems(write_page(tmp_path, legacy, "# T", "legacy.md")) == []


def test_every_page_labels_only_what_it_has():
    found = [problem for page in PAGES for problem in levels.problems(page)]
    assert not found, "\n".join(found)


# --- the backlog --------------------------------------------------------------------------------


def test_every_page_outside_the_backlog_is_fully_labelled_and_the_backlog_only_shrinks():
    backlog = levels.backlog()
    assert len(backlog) == len(set(backlog)), "a page is listed twice in data/levels-backlog.txt"
    keys = {levels.page_key(page): page for page in question_pages(PAGES)}
    gone = [key for key in backlog if key not in keys]
    assert not gone, f"data/levels-backlog.txt lists pages that do not exist: {gone}"
    unlabelled = {key: levels.unlabelled(page) for key, page in keys.items()}
    outside = {key: [block.line for block in blocks] for key, blocks in unlabelled.items()
               if blocks and key not in backlog}  # fmt: skip
    assert not outside, ("pages outside data/levels-backlog.txt with Mechanism paragraphs that name no evidence "
                         f"(file lines; label each with <!-- evidence: LEVEL ID -->): {outside}")  # fmt: skip
    done = [key for key in backlog if not unlabelled[key]]
    assert not done, f"fully labelled now: remove them from data/levels-backlog.txt: {done}"


# --- the site -----------------------------------------------------------------------------------


def test_the_site_renders_markers_header_and_checked_quotes(tmp_path):
    page = write_page(tmp_path, PROOF, BODY + "\n## Sources\n\n* torch\n")
    text, _ = levels.body_and_first_line(page.path)
    rendered = site_levels.place(text, page)
    assert "<!-- evidence" not in rendered
    assert ('Evidence: <span class="ev-level ev-level--measured">measured</span> · <a href="#claim-grads_match"'
            in rendered)  # fmt: skip
    assert 'href="#source-reverse_comment"' in rendered and 'id="source-reverse_comment"' in rendered
    assert "torch/nn/parallel/distributed.py (torch " in rendered
    assert "(not yet run on a GPU)" in rendered
    header = rendered.split("\n## Mechanism")[0]
    assert "Evidence on this page: 1 measured · 1 modelled · 1 sourced · 1 GPU-ready, not yet run on a GPU" in header


def test_an_excerpt_source_links_to_its_url(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "EXCERPTS_DIR", excerpt(tmp_path, GOOD_EXCERPT, "NCCL_ALGO"))
    monkeypatch.setattr(sources.load_excerpt, "__defaults__", (sources.EXCERPTS_DIR,))
    words, link = site_levels.source_label("s", {"quote": "NCCL_ALGO", "in": "excerpt:an-excerpt", "backs": "b"})
    assert (words, link) == ("NCCL environment variables (NCCL 2.21.5 docs)",
                             "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html")  # fmt: skip


def test_the_report_counts_levels_and_lists_unlabelled_paragraphs():
    text = site_levels.report(load_pages())
    assert "Claims and checked quotes per level:" in text and "Mechanism paragraphs:" in text
    for key in levels.backlog()[:3]:
        assert f"  {key}: " in text
    assert "[NOT IN THE BACKLOG]" not in text


def test_the_home_table_filters_by_level():
    page = next(page for page in question_pages(PAGES) if page.proofs)
    assert "measured" in site_levels.row_levels(page).split()
    assert 'value="gpu-ready"' in site_levels.level_options()
    assert (DOCS_DIR / "javascripts" / "question-index.js").read_text(encoding="utf-8").count('"qi-levels"') == 1


def test_a_key_fact_with_a_checked_source_links_to_its_quote(tmp_path):
    from verify.website import study

    page = write_page(tmp_path, PROOF, "# T")
    fact = {"fact": "DDP reverses its buckets.", "source": "reverse_comment"}
    assert study.fact_proof(page, fact, "p.md") == "[sourced: `reverse_comment`](p.md#source-reverse_comment)"


def test_a_gpu_ready_proof_without_evidence_says_not_yet_run_on_a_gpu(tmp_path):
    from verify.website import evidence_box

    page = write_page(tmp_path, PROOF, "# T")
    gpu = next(proof for proof in page.proofs if proof.requires == "cuda")
    box = evidence_box.gpu_ready_box(gpu, page.slug)
    assert box.startswith('!!! info "GPU-ready, not yet run on a GPU"') and 'id="claim-nccl_fast"' in box
    cpu = next(proof for proof in page.proofs if proof.requires is None)
    assert "1 measured, 1 modelled" in evidence_box.levels_note(cpu, {"claims": []})
    assert "1 GPU-ready, not yet run on a GPU" in evidence_box.levels_note(gpu, None)
