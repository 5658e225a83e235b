"""Study mode's generators (verify/website/study.py, verify/website/figures.py) on the real pages and on made-up evidence."""

import json
import re
import textwrap
from random import Random

import pytest

from verify import evidence
from verify.website import figures, study
from verify.pages import load_page, load_pages, question_pages

PAGES = load_pages()


# --- the real pages -------------------------------------------------------------------------------


@pytest.mark.parametrize("page", [p for p in PAGES if figures.declared(p)], ids=lambda page: page.slug)
def test_each_declared_figure_can_be_drawn_and_is_placed(page):
    assert figures.problems(page) == []


def test_figure_ids_are_unique_and_at_least_40_pages_have_one_in_at_least_4_kinds():
    ids = [spec["id"] for page in PAGES for spec in figures.declared(page)]
    assert len(ids) == len(set(ids))
    assert len([page for page in PAGES if figures.declared(page)]) >= 40
    assert len({spec["kind"] for page in PAGES for spec in figures.declared(page)}) >= 4


@pytest.mark.parametrize("spec, page", [(spec, page) for page in PAGES for spec in figures.declared(page)],
                         ids=lambda value: value["id"] if isinstance(value, dict) else "")  # fmt: skip
def test_each_figure_drawn_from_the_reference_evidence_reads_on_a_phone(spec, page):
    """Text at least 11 CSS px when the figure is PHONE_PX wide (a 390 px screen), and alt text that names
    every value drawn. A figure whose evidence is missing or whose claim failed is skipped here: its place
    says so (the tests on made-up pages below)."""
    try:
        resolved, bound = figures.resolve(spec, page), figures.bound_of(spec, page)
    except figures.MissingData as missing:
        pytest.skip(str(missing))
    svg = figures.draw(spec, resolved, bound)
    width_pt = float(re.search(r'<svg[^>]* width="([\d.]+)pt"', svg).group(1))
    sizes = [float(size) for size in re.findall(r"font(?:-size)?:\s*(?:[a-z]+ )*([\d.]+)px", svg)]
    assert sizes and min(sizes) * figures.PHONE_PX / width_pt >= 11, f"smallest text {min(sizes)} of {width_pt} pt"
    alt = figures.alt_text(spec, resolved)
    for _, _, value in resolved if spec["kind"] not in ("line", "timeline") else []:
        assert figures.show(value) in alt
    assert len(svg) < 50_000, "three figures on a page must stay under 150 KB"


def test_every_question_has_a_30_second_answer_for_the_mock_interview():
    for page in question_pages(PAGES):
        html = study.answer_html(page)
        assert len(html) > 100 and "<p>" in html, page.slug
        assert ".md" not in html, f"{page.slug}: a relative link survived into the mock interview"


# --- made-up pages and evidence -------------------------------------------------------------------


def fake_evidence(page, values: dict, passed: bool = True) -> dict:
    """Evidence of a page's only proof; `values` maps claim id -> (measured, control, details)."""
    (proof,) = page.proofs
    return {
        "snippet": proof.snippet, "date": "2026-01-02T03:04:05+00:00",
        "claims": [
            {"id": claim, "statement": proof.claims[claim].says, "passed": passed, "reason": "",
             "reports": [{"rank": 0, "measured": m, "control": c, "op": "<=", "bound": 1e-6, "details": d}]}
            for claim, (m, c, d) in values.items()
        ],
    }  # fmt: skip


@pytest.fixture
def docs(tmp_path, monkeypatch):
    """A docs folder of one topic; pages are written into it with `write(slug, front_matter, body)`."""
    root = tmp_path / "docs"
    (root / "questions" / "sharding").mkdir(parents=True)
    (root / "questions" / "sharding" / "index.md").write_text("---\ntitle: Sharding\norder: 1\n---\n")
    for module in (study, figures):
        monkeypatch.setattr(module, "DOCS_DIR", root)
    found = {}
    monkeypatch.setattr(evidence, "read", lambda proof, *_: found.get(proof.snippet))

    def write(slug, meta, body="", evidence_values=None, passed=True):
        path = root / "questions" / "sharding" / f"{slug}.md"
        path.write_text("---\n" + textwrap.dedent(meta) + "---\n\n" + textwrap.dedent(body))
        page = load_page(path)
        assert page.error is None, page.error
        if evidence_values is not None:
            found[page.proofs[0].snippet] = fake_evidence(page, evidence_values, passed)
        return page

    return write


SHARDED = """\
title: How many bytes does each rank hold under ZeRO?
difficulty: senior
key_facts:
  - fact: ZeRO-3 holds a quarter of what DDP holds per rank.
    claim: zero_shards_bytes
  - fact: The ZeRO paper.
    source: https://arxiv.org/abs/1910.02054
proofs:
  - snippet: zero_bytes.py
    claims:
      zero_shards_bytes: {says: "Each rank holds fewer bytes.", control: plain DDP}
figures:
  - id: zero-bytes
    title: Bytes per rank
    alt: Bars of bytes per rank for DDP and each ZeRO stage
    kind: bar
    unit: bytes
    data:
      - {label: bytes per rank, claim: zero_shards_bytes, value: details.bytes_per_rank}
"""
BODY = """\
# How many bytes?

??? success "30-second answer"
    Fewer: see [the other page](other.md) and `zero`.

## Proof

<!-- figure: zero-bytes -->
"""
PER_RANK = {"ddp": 1600, "zero1": 1000, "zero2": 700, "zero3": 400}


def test_a_dict_detail_becomes_one_bar_per_entry_with_its_value_in_the_alt_text(docs):
    page = docs("sharded", SHARDED, BODY, {"zero_shards_bytes": (400, 1600, {"bytes_per_rank": PER_RANK})})
    (spec,) = figures.declared(page)
    resolved = figures.resolve(spec, page)
    assert resolved == [(key, "bytes per rank", float(value)) for key, value in PER_RANK.items()]
    alt = figures.alt_text(spec, resolved)
    assert alt.startswith("Bars of bytes per rank") and "zero3, bytes per rank: 400" in alt
    svg = figures.render_all([page])["assets/figures/zero-bytes.svg"]
    assert svg.lstrip().startswith(("<?xml", "<svg")) and "zero3" in svg and "1.6k" not in svg  # 1,600 < 10k


def test_a_dict_of_dicts_becomes_grouped_bars_one_colour_per_outer_key(docs):
    meta = SHARDED.replace("value: details.bytes_per_rank}", "value: details.bytes_per_rank, labels: {zero3: ZeRO-3}}")
    nested = {"ddp": {"params": 40, "grads": 40}, "zero3": {"params": 20, "grads": 20}}
    page = docs("sharded", meta, BODY, {"zero_shards_bytes": (400, 1600, {"bytes_per_rank": nested})})
    (spec,) = figures.declared(page)
    assert figures.resolve(spec, page) == [
        ("params", "ddp", 40.0), ("grads", "ddp", 40.0), ("params", "ZeRO-3", 20.0), ("grads", "ZeRO-3", 20.0)
    ]  # fmt: skip
    assert "ZeRO-3" in figures.render_all([page])["assets/figures/zero-bytes.svg"]


def test_a_placed_figure_is_an_image_with_alt_text_or_the_command_that_makes_it(docs):
    page = docs("sharded", SHARDED, BODY)  # no evidence yet
    shown = figures.place(page.path.read_text(), page, lambda path: False)
    assert "python -m pytest verify -k sharded" in shown and "no current evidence for zero_bytes.py" in shown
    page = docs("sharded", SHARDED, BODY, {"zero_shards_bytes": (400, 1600, {"bytes_per_rank": PER_RANK})})
    shown = figures.place(page.path.read_text(), page, lambda path: path == "assets/figures/zero-bytes.svg")
    assert "![Bars of bytes per rank for DDP and each ZeRO stage. Values: ddp" in shown
    assert "](../../assets/figures/zero-bytes.svg)" in shown and "<figcaption>Bytes per rank." in shown


def test_a_figure_whose_key_the_evidence_lacks_shows_what_is_missing(docs):
    page = docs("sharded", SHARDED, BODY, {"zero_shards_bytes": (400, 1600, {})})
    assert figures.render_all([page]) == {}
    assert "has no details.bytes_per_rank" in figures.place(page.path.read_text(), page, lambda path: False)


def test_line_figures_take_lists_of_keys_or_one_dict_keyed_by_x(docs):
    meta = SHARDED.replace("kind: bar", "kind: line").replace(
        "      - {label: bytes per rank, claim: zero_shards_bytes, value: details.bytes_per_rank}",
        "      - {label: measured, claim: zero_shards_bytes, x: [1, details.m], y: [control, measured]}\n"
        "      - {label: formula, claim: zero_shards_bytes, y: details.by_m}",
    )
    details = {"m": 4, "by_m": {"8": 0.11, "1": 0.5, "4": 0.2}}
    page = docs("sharded", meta, BODY, {"zero_shards_bytes": (0.22, 0.51, details)})
    (spec,) = figures.declared(page)
    assert figures.resolve(spec, page) == [
        ("measured", [(1, 0.51), (4.0, 0.22)]),
        ("formula", [(1.0, 0.5), (4.0, 0.2), (8.0, 0.11)]),
    ]
    assert "<svg" in figures.render_all([page])["assets/figures/zero-bytes.svg"]


def test_log_bars_draw_an_exact_zero(docs):
    meta = SHARDED.replace("kind: bar", "kind: logbar").replace("value: details.bytes_per_rank", "value: measured")
    meta = meta.replace("      - {label: bytes", "      - {label: control, claim: zero_shards_bytes, value: control}\n      - {label: bytes")
    page = docs("sharded", meta, BODY, {"zero_shards_bytes": (0.0, 0.5, {})})
    assert "hatched stub: exactly 0" in figures.render_all([page])["assets/figures/zero-bytes.svg"]


def test_malformed_figure_declarations_are_named(docs):
    page = docs("sharded", SHARDED.replace("kind: bar", "kind: pie").replace("claim: zero_shards_bytes, value", "claim: nope, value"), "# no marker\n")
    wrong = "\n".join(figures.problems(page))
    assert "kind 'pie'" in wrong and "'nope', which is no claim" in wrong and "no '<!-- figure: zero-bytes -->' line" in wrong
    with pytest.raises(figures.FigureError):
        figures.render_all([page])


@pytest.mark.parametrize(
    "values, passed, requires, expected",
    [
        (None, True, None, "no evidence yet"),
        ({"zero_shards_bytes": (1, 2, {})}, True, None, "passed"),
        ({"zero_shards_bytes": (1, 2, {})}, False, None, "failed"),
        (None, True, "cuda", "GPU-ready, not yet run on a GPU"),
    ],
)
def test_proof_status(docs, values, passed, requires, expected):
    meta = SHARDED if not requires else SHARDED.replace("  - snippet: zero_bytes.py\n", "  - snippet: zero_bytes.py\n    requires: cuda\n")
    page = docs("sharded", meta, BODY, values, passed)
    assert study.proof_status(page)[0] == expected


def test_stale_evidence_counts_as_none(docs):
    page = docs("sharded", SHARDED, BODY, {"zero_shards_bytes": (1, 2, {})})
    docs("sharded", SHARDED.replace("Each rank holds fewer bytes.", "A new statement."), BODY)
    assert study.proof_status(load_page(page.path))[0] == "no evidence yet"


def test_cheat_sheet_links_each_fact_to_its_claim_with_the_measured_value(docs, tmp_path):
    docs("sharded", SHARDED, BODY, {"zero_shards_bytes": (400, 1600, {})})
    nav = [{"Sharding": ["questions/sharding/index.md", "questions/sharding/sharded.md"]}]
    sheet = study.cheat_sheet(nav, study.DOCS_DIR / "cheat-sheet.md")
    assert "## Sharding" in sheet and '<div class="cheat-topic" markdown="1">' in sheet
    assert "ZeRO-3 holds a quarter of what DDP holds per rank." in sheet
    assert "(questions/sharding/sharded.md#claim-zero_shards_bytes)" in sheet
    assert "measured <code>400</code>, control <code>1600</code> (2026-01-02)" in sheet  # escaped, in <code> (N29)
    assert "<https://arxiv.org/abs/1910.02054>" in sheet


def test_questions_json_carries_the_answer_and_the_page_url(docs):
    docs("sharded", SHARDED, BODY)
    nav = [{"Sharding": ["questions/sharding/index.md", "questions/sharding/sharded.md"]}]
    data = json.loads(study.questions_json(nav, lambda page: f"questions/sharding/{page.slug}/"))
    (question,) = data["questions"]
    assert question["url"] == "questions/sharding/sharded/" and question["difficulty"] == "senior"
    assert question["answer_html"] == "<p>Fewer: see the other page and <code>zero</code>.</p>"
    assert question["topic_title"] == "Sharding" and question["proof"] == "no evidence yet"


# --- the one-week plan on the home page -----------------------------------------------------------


def site_nav() -> list:
    import yaml

    from verify.paths import ROOT
    from verify.website import hooks

    return hooks.expand_nav(yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)["nav"])


def test_the_week_plan_reads_every_question_page_once_in_days_within_20_percent():
    """Generated from the pages, so it holds as pages are added: each question on exactly one day, in the
    site's order, and no day more than 20% longer to read than the shortest."""
    ordered = study.ordered_questions(site_nav())
    assert {page.path for page in ordered} == {page.path for page in question_pages(PAGES)}
    days = study.week_days(ordered)
    assert len(days) == study.PLAN_DAYS
    assert [page.path for day in days for page in day] == [page.path for page in ordered]
    minutes = [sum(study.reading_minutes(page) for page in day) for day in days]
    assert max(minutes) <= 1.2 * min(minutes), [round(m) for m in minutes]
    plan = study.week_plan(site_nav(), study.DOCS_DIR / "index.md")
    linked = re.findall(r"\]\((questions/[^)]+\.md)\)", plan)
    assert sorted(linked) == sorted(page.path.relative_to(study.DOCS_DIR).as_posix() for page in ordered)


def test_the_week_plan_stays_even_with_a_third_more_pages_of_the_same_lengths():
    random = Random(25)
    minutes = [study.reading_minutes(page) for page in study.ordered_questions(site_nav())]
    for _ in range(len(minutes) // 3):
        minutes.insert(random.randrange(len(minutes) + 1), random.choice(minutes))
    ends = study.balanced_days(minutes)
    days = [sum(minutes[start:end]) for start, end in zip([0] + ends[:-1], ends)]
    assert ends[-1] == len(minutes) and max(days) <= 1.2 * min(days), [round(d) for d in days]


@pytest.mark.parametrize("minutes, days, ends", [
    ([5, 1, 1, 1, 1, 1], 2, [1, 6]),
    ([1] * 14, 7, [2, 4, 6, 8, 10, 12, 14]),
    ([3, 3], 7, [1, 2]),  # fewer pages than days: one page a day
])  # fmt: skip
def test_balanced_days_make_the_longest_day_as_short_as_it_can_be(minutes, days, ends):
    assert study.balanced_days(minutes, days) == ends


def test_the_week_plan_of_made_up_pages_links_each_once_with_its_reading_time(docs):
    words = {"short": 200, "long": 600, "mid": 400}
    for slug, count in words.items():
        docs(slug, f"title: The {slug} page?\ndifficulty: mid\n", "# The page\n\n" + "word " * count)
    nav = [{"Sharding": ["questions/sharding/index.md"] + [f"questions/sharding/{slug}.md" for slug in words]}]
    plan = study.week_plan(nav, study.DOCS_DIR / "index.md")
    rows = [line for line in plan.splitlines() if re.match(r"\| \d+ \|", line)]
    assert len(rows) == 3  # three pages: three days
    for row, slug in zip(rows, words):
        assert row.count("](questions/sharding/") == 1 and f"{slug}.md)" in row
    assert "| 3 min, 1 question (1 mid) |" in rows[1] and "#topic=sharding" in rows[0]


def test_a_figure_whose_claim_failed_says_so_in_its_place(docs):
    page = docs("sharded", SHARDED, BODY, {"zero_shards_bytes": (400, 1600, {"bytes_per_rank": PER_RANK})}, passed=False)
    assert figures.render_all([page]) == {}
    shown = figures.place(page.path.read_text(), page, lambda path: True)
    assert "claim zero_shards_bytes failed in the latest run" in shown and "<figure" not in shown


def test_a_list_in_the_evidence_is_keyed_by_position_and_indexed_by_number(docs):
    meta = SHARDED.replace(
        "      - {label: bytes per rank, claim: zero_shards_bytes, value: details.bytes_per_rank}",
        '      - {label: per rank, claim: zero_shards_bytes, value: measured, labels: {"0": rank 0, "1": rank 1}}\n'
        "      - {group: total, label: first of the control, claim: zero_shards_bytes, value: control.0}",
    )
    page = docs("sharded", meta, BODY, {"zero_shards_bytes": ([3, 8], [5, 7], {})})
    (spec,) = figures.declared(page)
    assert figures.resolve(spec, page) == [("rank 0", "per rank", 3.0), ("rank 1", "per rank", 8.0), ("total", "first of the control", 5.0)]


def test_an_unquoted_label_with_a_comma_is_named(docs):
    page = docs("sharded", SHARDED.replace("{label: bytes per rank,", "{label: bytes, per rank,"), BODY)
    assert "unknown keys ['per rank']" in "\n".join(figures.problems(page))


def test_tick_labels_wrap_long_identifiers_after_an_underscore_or_a_slash():
    assert figures.wrap("gather_for_metrics", 9) == "gather_\nfor_\nmetrics"
    assert figures.wrap("NVIDIA/AWS/Microsoft header", 12) == "NVIDIA/\nAWS/\nMicrosoft\nheader"
    assert figures.wrap("after epoch 1 (load_state)") == "after epoch\n1\n(load_state)"  # short words stay whole


def test_stacked_bars_take_a_dict_of_dicts_one_bar_per_outer_key_and_every_rank_on_request(docs):
    meta = SHARDED.replace("kind: bar", "kind: stacked").replace(
        "{label: bytes per rank, claim: zero_shards_bytes, value: details.bytes_per_rank}",
        "{claim: zero_shards_bytes, value: details.bytes_per_rank, ranks: all, labels: {ddp: DDP, grads: gradients}}")
    stages = {"ddp": {"params": 4, "grads": 4}, "zero3": {"params": 2, "grads": 2}}
    page = docs("sharded", meta, BODY, {"zero_shards_bytes": (4, 8, {"bytes_per_rank": stages})})
    (spec,) = figures.declared(page)
    assert figures.problems(page) == []
    assert figures.resolve(spec, page) == [("DDP", "params", 4.0), ("DDP", "gradients", 4.0), ("zero3", "params", 2.0), ("zero3", "gradients", 2.0)]
    svg = figures.render_all([page])["assets/figures/zero-bytes.svg"]
    assert "<svg" in svg
    record = evidence.read(page.proofs[0])
    second = dict(record["claims"][0]["reports"][0], rank=1, details={"bytes_per_rank": {"ddp": {"params": 4, "grads": 4}}})
    record["claims"][0]["reports"].append(second)
    assert [group for group, _, _ in figures.resolve(spec, page)] == ["DDP, rank 0"] * 2 + ["zero3, rank 0"] * 2 + ["DDP, rank 1"] * 2


def test_a_timeline_draws_one_row_per_rank_against_time_or_against_order(docs):
    meta = SHARDED.replace("kind: bar", "kind: timeline\n    x_label: ms").replace(
        "{label: bytes per rank, claim: zero_shards_bytes, value: details.bytes_per_rank}",
        "{label: 1F1B, claim: zero_shards_bytes, events: details.spans, labels: {F: forward}}")
    page = docs("sharded", meta, BODY, {"zero_shards_bytes": (4, 8, {"spans": [["F", "0", 0.5, 12.0], ["B", "0", 12.5, 36.0]]})})
    (spec,) = figures.declared(page)
    assert figures.problems(page) == []
    assert figures.resolve(spec, page) == [("1F1B", [("forward", "0", 0.5, 12.0), ("B", "0", 12.5, 36.0)])]
    assert "1F1B (ms): forward 0 0.5 to 12, B 0 12.5 to 36" in figures.alt_text(spec, figures.resolve(spec, page))
    svg = figures.render_all([page])["assets/figures/zero-bytes.svg"]
    assert "forward" in svg and "1F1B" in svg
    record = evidence.read(page.proofs[0])
    record["claims"][0]["reports"][0]["details"]["spans"] = [["backward reaches layer", "3"], ["bucket all-reduce starts", "0", "[3]"]]
    record["claims"][0]["reports"].append(dict(record["claims"][0]["reports"][0], rank=1))
    resolved = figures.resolve(spec, page)
    assert [row for row, _ in resolved] == ["1F1B, rank 0", "1F1B, rank 1"]
    assert resolved[0][1] == [("backward reaches layer", "3", 0.0, 1.0), ("bucket all-reduce starts", "0 [3]", 1.0, 2.0)]
    record["claims"][0]["reports"][0]["details"]["spans"] = [["F", 1.0]]  # one number: neither form
    with pytest.raises(figures.MissingData, match="neither"):
        figures.resolve(spec, page)


def test_a_timeline_item_needs_its_events(docs):
    meta = SHARDED.replace("kind: bar", "kind: timeline")
    page = docs("sharded", meta, BODY)
    assert "each item needs ('events',)" in "\n".join(figures.problems(page))
