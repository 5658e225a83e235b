"""Figures drawn from the evidence at build time (matplotlib, SVG), declared in a page's front matter.

    figures:                       # at the END of the front matter
      - id: dp-accuracy-gaps       # unique across the site: assets/figures/<id>.svg
        title: How far DDP lands from one process on the full batch     # the caption
        alt: Bar chart on a log scale of the largest difference ...     # measured values are appended
        kind: logbar               # bar | logbar | line | stacked | timeline
        unit: max |difference|     # the y axis
        bound: averaged_grads_match_full_batch   # optional: draw this claim's tolerance or band
        data:                      # bars: one per item; a dict-valued key gives one bar per entry,
                                   # a dict of dicts {series: {group: n}} grouped bars; `labels:` renames keys
          - {group: gradients, label: DDP, claim: averaged_grads_match_full_batch, value: measured}
          - {group: gradients, label: no all-reduce, claim: averaged_grads_match_full_batch, value: control}
        # line: each item is a series, `x` and `y` lists of keys (or numbers), or `y` one dict-valued key
        #   - {label: measured, claim: c, x: [details.m1, details.m4], y: [control, measured]}
        #   - {label: measured, claim: c, y: details.bubble_by_micro_batches}
        # stacked: one bar per group, its segments one colour per label; a dict of dicts {bar: {part: n}}
        #   gives one bar per outer key; `ranks: all` draws it for every reporting rank ("ZeRO-1, rank 1")
        #   - {claim: c, value: details.bytes_per_rank, ranks: all, labels: {optimizer: Adam state}}
        # timeline: `events` a list of events, one row per reporting rank (`ranks: first`: rank 0 only);
        #   an event is [kind, text..., start, end] (numbers: against time, `x_label` names the unit) or
        #   [kind, text...] (no numbers: against order, one slot each); one colour per kind
        #   - {label: 1F1B, claim: c, events: details.one_f_one_b_events, labels: {F: forward}}

A key is `measured`, `control`, `bound` or `details.NAME` (`details.NAME.KEY` inside a dict, `details.NAME.0`
inside a list; a list of numbers is a dict keyed by position, so per-rank lists give one bar per rank) of the
claim's first report in the latest evidence (of every report, for `ranks: all` and timelines). A claim that failed in that evidence draws no figure: its
place says the claim failed and why, as it says what is missing when there is no evidence. The page puts the figure where it has the line
`<!-- figure: ID -->`; without current evidence that place shows the command that makes it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import textwrap
from pathlib import Path, PurePosixPath

from verify.pages import Page
from verify.paths import CACHE_DIR, DOCS_DIR
from verify import evidence

FIGURES_DIR = "assets/figures"
KINDS = ("bar", "logbar", "line", "stacked", "timeline")
COLORS = ["#3366cc", "#e8871e", "#2a9d5c", "#8e5ac8", "#888888", "#c0392b", "#17a2b8"]
REQUIRED = ("id", "title", "alt", "kind", "data")
ITEM_KEYS = {"group", "label", "claim", "value", "x", "y", "labels", "events", "ranks"}
NEEDS = {"line": ("x", "y"), "timeline": ("events",)}  # what each item must name (the other kinds: a value)
# Sized for a phone: a 390 px wide screen shows the figure about PHONE_PX wide, so the smallest text,
# SMALLEST_PT of a FIGSIZE_IN[0]-inch (72 pt per inch) drawing, reads at 10 * 358 / 317 = 11.3 CSS px.
FIGSIZE_IN = (4.4, 3.3)
FONT_PT = 11
SMALLEST_PT = 10
PHONE_PX = 358


class FigureError(ValueError):
    """A figure declaration that cannot be drawn; the build fails naming the page."""


class MissingData(LookupError):
    """The evidence lacks what a figure needs (no run yet, stale, or a key the snippet does not report)."""


def declared(page: Page) -> list[dict]:
    return page.meta.get("figures") or []


def marker(figure_id: str) -> str:
    return f"<!-- figure: {figure_id} -->"


def problems(page: Page) -> list[str]:
    """What is wrong with a page's figure declarations (empty when they can be drawn)."""
    found = []
    text = page.path.read_text(encoding="utf-8")
    for spec in declared(page):
        if not isinstance(spec, dict):
            found.append(f"{page.path}: a figure must be a mapping, not {spec!r}")
            continue
        name = spec.get("id", "?")
        missing = [key for key in REQUIRED if not spec.get(key)]
        if missing:
            found.append(f"{page.path}: figure {name!r} lacks {missing}")
            continue
        if spec["kind"] not in KINDS:
            found.append(f"{page.path}: figure {name!r} has kind {spec['kind']!r}, not one of {KINDS}")
        unpictured = spec.get("not_pictured") or {}
        if not isinstance(unpictured, dict) or not all(isinstance(why, str) and why.strip() for why in unpictured.values()):
            found.append(f"{page.path}: figure {name!r}: not_pictured maps a mutant to why the figure cannot show it")
        for item in spec["data"]:
            claim = item.get("claim") or spec.get("claim")
            if claim not in page.claim_ids:
                found.append(f"{page.path}: figure {name!r} names {claim!r}, which is no claim of this page")
            unknown = sorted(set(item) - ITEM_KEYS)
            if unknown:  # most often an unquoted label with a comma, which YAML splits into two keys
                found.append(f"{page.path}: figure {name!r} has an item with unknown keys {unknown} (quote a label that has a comma)")
            keys = NEEDS.get(spec["kind"], ("value",))
            if not all(key in item for key in keys[-1:]):
                found.append(f"{page.path}: figure {name!r}: each item needs {keys}")
        if spec.get("bound") and spec["bound"] not in page.claim_ids:
            found.append(f"{page.path}: figure {name!r} bound {spec['bound']!r} is no claim of this page")
        if marker(name) not in text:
            found.append(f"{page.path}: declares figure {name!r} but has no '{marker(name)}' line")
    return found


# --- reading the evidence -----------------------------------------------------------------------


def first_report(page: Page, claim_id: str) -> dict:
    return reports(page, claim_id)[0]


def reports(page: Page, claim_id: str) -> list[dict]:
    """Every rank's report of a claim in the latest evidence, rank 0 first."""
    for proof in page.proofs:
        if claim_id in proof.claims:
            found = evidence.current(proof)
            if found is None:
                raise MissingData(f"no current evidence for {proof.snippet}")
            claim = next(c for c in found["claims"] if c["id"] == claim_id)
            if claim.get("passed") is False:  # a failed claim's numbers are no picture of the mechanism
                raise MissingData(f"claim {claim_id} failed in the latest run, so it draws no figure (its evidence box says why)")
            if not claim["reports"]:
                raise MissingData(f"claim {claim_id} was not reported in the latest run")
            return sorted(claim["reports"], key=lambda report: report.get("rank") or 0)
    raise FigureError(f"{page.path}: {claim_id!r} is no claim of this page")


def raw(report: dict, key, claim_id: str):
    """Whatever the report holds at `key` (`details.NAME.KEY`, `measured.0`)."""
    value = report
    for part in str(key).split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
            continue
        if not isinstance(value, dict) or part not in value:
            raise MissingData(f"the evidence of {claim_id} has no {key}")
        value = value[part]
    return value


def lookup(report: dict, key, claim_id: str):
    """A number, or a dict of numbers, at `key` of a report; a number given directly is itself."""
    if isinstance(key, (int, float)):
        return key
    value = raw(report, key, claim_id)
    if isinstance(value, list):  # per rank or per step: keyed by position
        value = {str(index): entry for index, entry in enumerate(value)}
    if isinstance(value, dict):  # a dict of numbers, or of dicts of numbers (one level deeper)
        return {
            str(k): {str(i): number(w, f"{claim_id} {key}.{k}.{i}") for i, w in v.items()}
            if isinstance(v, dict) else number(v, f"{claim_id} {key}.{k}")
            for k, v in value.items()
        }  # fmt: skip
    return number(value, f"{claim_id} {key}")


def number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MissingData(f"{where} is {value!r}, not a number")
    return float(value)


def events_of(value, claim_id: str, names: dict) -> list[tuple]:
    """[(kind, text, start, end)] from a report's list of events: [kind, text..., start, end] against time,
    [kind, text...] against order (one slot each)."""
    if not isinstance(value, list) or not value:
        raise MissingData(f"the events of {claim_id} are {value!r}, not a list of events")
    found = []
    for position, event in enumerate(value):
        if not isinstance(event, list) or not event:
            raise MissingData(f"an event of {claim_id} is {event!r}, not a list")
        times = [part for part in event if isinstance(part, (int, float)) and not isinstance(part, bool)]
        words = [str(part) for part in event if part not in times]
        if len(times) not in (0, 2) or not words:
            raise MissingData(f"the event {event!r} of {claim_id} is neither [kind, text..., start, end] nor [kind, text...]")
        start, end = (float(times[0]), float(times[1])) if times else (float(position), float(position + 1))
        found.append((names.get(words[0], words[0]), " ".join(words[1:]), start, end))
    return found


def ranked(item: dict, page: Page, claim: str, every: bool) -> list[tuple[str, dict]]:
    """(suffix, report) for rank 0 alone, or for every reporting rank (suffix ", rank N")."""
    found = reports(page, claim)
    if not every or len(found) == 1:
        return [("", found[0])]
    return [(f", rank {report.get('rank', index)}", report) for index, report in enumerate(found)]


def resolve(spec: dict, page: Page) -> list:
    """Bars: [(group, label, value)]; lines: [(label, [(x, y), ...])]; timelines: [(row, [(kind, text,
    start, end), ...])]. Raises MissingData."""
    out = []
    for item in spec["data"]:
        claim = item.get("claim") or spec.get("claim")
        report = first_report(page, claim)
        label = str(item.get("label", item.get("value", claim)))
        names = item.get("labels") or {}  # optional: nicer names for a dict's keys or an event's kind
        if spec["kind"] == "timeline":
            for suffix, each in ranked(item, page, claim, item.get("ranks", "all") == "all"):
                out.append((label + suffix, events_of(raw(each, item["events"], claim), claim, names)))
            continue
        if spec["kind"] == "stacked":
            for suffix, each in ranked(item, page, claim, item.get("ranks") == "all"):
                value = lookup(each, item["value"], claim)
                if isinstance(value, dict) and all(isinstance(entry, dict) for entry in value.values()):
                    out += [(names.get(g, g) + suffix, names.get(s, s), v) for g, inner in value.items() for s, v in inner.items()]
                elif isinstance(value, dict):  # one bar, one segment per key
                    out += [(str(item.get("group", label)) + suffix, names.get(key, key), entry) for key, entry in value.items()]
                else:
                    out.append((str(item.get("group", "")) + suffix, label, value))
            continue
        if spec["kind"] == "line":
            y = item["y"]
            if isinstance(y, list):
                xs = [lookup(report, x, claim) for x in item.get("x") or range(1, len(y) + 1)]
                points = list(zip(xs, (lookup(report, key, claim) for key in y)))
            else:
                values = lookup(report, y, claim)
                if not isinstance(values, dict):
                    raise FigureError(f"{page.path}: figure {spec['id']}: a single `y` key must name a dict")
                points = sorted((float(k), v) for k, v in values.items())
            out.append((label, points))
        else:
            value = lookup(report, item["value"], claim)
            if isinstance(value, dict) and all(isinstance(entry, dict) for entry in value.values()):
                # {series: {group: number}}: one colour per outer key, grouped by the inner keys
                out += [(names.get(g, g), names.get(s, s), v) for s, inner in value.items() for g, v in inner.items()]
            elif isinstance(value, dict):
                out += [(names.get(key, key), label, entry) for key, entry in value.items()]
            else:
                out.append((str(item.get("group", "")), label, value))
    return out


def bound_of(spec: dict, page: Page):
    """(op, bound) of the claim named by `bound:`, or None."""
    if not spec.get("bound"):
        return None
    report = first_report(page, spec["bound"])
    return report.get("op"), report.get("bound")


def show(value: float) -> str:
    if value == 0:
        return "0"
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:.3g}"


def short(value: float) -> str:
    """A label that fits on a bar: 83,460 -> 83.5k (the alt text keeps every digit)."""
    for above, unit, suffix in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):
        if abs(value) >= above:
            return f"{value / unit:.3g}{suffix}"
    return show(value)


def wrap(text: str, width: int = 12) -> str:
    """Lines of at most `width` characters; a long identifier or a/b/c may break after `_` or `/`."""
    words = [word.replace("_", "_\0").replace("/", "/\0") if len(word) > width else word for word in str(text).split(" ")]
    return textwrap.fill(" ".join(words).replace("\0", " \0"), width, break_long_words=False).replace(" \0", "").replace("\0", "")


def alt_text(spec: dict, resolved: list) -> str:
    """The declared alt text, then every value drawn, so a reader who cannot see the figure loses nothing."""
    if spec["kind"] == "line":
        values = "; ".join(f"{label}: " + ", ".join(f"{show(x)} → {show(y)}" for x, y in points) for label, points in resolved)
    elif spec["kind"] == "timeline" and spec.get("x_label"):
        values = "; ".join(f"{row} ({spec['x_label']}): " + ", ".join(f"{kind} {text}".strip() + f" {show(start)} to {show(end)}"
                                                                     for kind, text, start, end in events) for row, events in resolved)  # fmt: skip
    elif spec["kind"] == "timeline":  # against order: the events in the order they happened
        values = "; ".join(f"{row}, in order: " + ", ".join(f"{kind} {text}".strip() for kind, text, _, _ in events)
                           for row, events in resolved)  # fmt: skip
    else:
        values = "; ".join(f"{group + ', ' if group else ''}{label}: {show(value)}" for group, label, value in resolved)
    return f"{spec['alt'].strip().rstrip('.')}. Values: {values}."


# --- drawing ------------------------------------------------------------------------------------


def draw(spec: dict, resolved: list, bound=None) -> str:
    """The figure as SVG text (matplotlib, no pyplot: nothing global is touched)."""
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": spec["id"], "font.size": FONT_PT}):
        rows = len(resolved) if spec["kind"] == "timeline" else 0
        height = max(FIGSIZE_IN[1] * 0.75, 1.5 + 0.42 * rows) if rows else FIGSIZE_IN[1]  # a timeline grows by its rows
        figure = Figure(figsize=(FIGSIZE_IN[0], height), layout="constrained")
        axes = figure.add_subplot()
        if spec["kind"] == "line":
            draw_lines(axes, spec, resolved)
        elif spec["kind"] == "timeline":
            draw_timeline(axes, spec, resolved)
        elif spec["kind"] == "stacked":
            draw_stacked(axes, resolved)
        else:
            draw_bars(axes, resolved, log=spec["kind"] == "logbar")
        if bound is not None:
            draw_bound(axes, *bound)
        if spec["kind"] != "timeline":
            axes.set_ylabel(wrap(spec.get("unit", ""), 28))
        axes.spines[["top", "right"]].set_visible(False)
        axes.grid(axis="x" if spec["kind"] == "timeline" else "y", alpha=0.3)
        names = axes.get_legend_handles_labels()[1]
        if names:  # above the plot, where it can cover no bar or point
            axes.legend(frameon=False, fontsize=SMALLEST_PT, loc="lower left", bbox_to_anchor=(0, 1), borderaxespad=0.2,
                        ncols=2 if len(names) > 2 and max(map(len, names)) <= 20 else 1)  # fmt: skip
        out = io.StringIO()
        figure.savefig(out, format="svg", metadata={"Date": None}, transparent=True)  # the page's colour shows through
    return out.getvalue()


def draw_bars(axes, resolved: list, log: bool) -> None:
    """One bar per item, items of a group side by side, one colour per label.

    A log scale cannot show 0: an exact 0 is a short hatched stub at the bottom, labelled 0.
    """
    if not any(group for group, _, _ in resolved):  # no groups: one bar per item, named by its label
        resolved = [(label, label, value) for _, label, value in resolved]
    groups = list(dict.fromkeys(group for group, _, _ in resolved))
    labels = list(dict.fromkeys(label for _, label, _ in resolved))
    colors = {label: COLORS[index % len(COLORS)] for index, label in enumerate(labels)}
    positive = [value for _, _, value in resolved if value > 0]
    floor = (min(positive) / 30 if positive else 1e-9) if log else 0
    widest = max(sum(1 for g, _, _ in resolved if g == group) for group in groups)
    width = 0.8 / widest
    legend = len(labels) > 1 and any(group != label for group, label, _ in resolved)  # colours the ticks do not name
    for index, group in enumerate(groups):
        members = [(label, value) for g, label, value in resolved if g == group]
        start = index - width * (len(members) - 1) / 2
        for offset, (label, value) in enumerate(members):
            x = start + offset * width
            stub = log and value <= 0
            top = floor * 2.5 if stub else value
            axes.bar(x, top - floor if log else top, width * 0.9, bottom=floor if log else 0, color=colors[label],
                     alpha=0.45 if stub else 1, hatch="///" if stub else None,
                     label=label if legend and label not in axes.get_legend_handles_labels()[1] else None)  # fmt: skip
            axes.annotate(short(value), (x, top), ha="center", va="bottom", fontsize=SMALLEST_PT,
                          rotation=90 if widest >= 3 else 0,  # three or more side by side: upright labels collide
                          xytext=(0, 2), textcoords="offset points")  # fmt: skip
    if log:
        axes.set_yscale("log")
        axes.set_ylim(floor, max(positive or [floor]) * 20)
    else:
        axes.set_ylim(0, (max(value for _, _, value in resolved) or 1) * 1.18)
    axes.set_xticks(range(len(groups)), [wrap(group, 12 if len(groups) < 4 else 9) for group in groups])
    if log and len(positive) < len(resolved):  # a legend entry that says what the stub means
        axes.bar(0, 0, 0, bottom=floor, color="#bbbbbb", hatch="///", label="hatched stub: exactly 0")
    if log:  # plain "1e-06" labels: matplotlib's 10^x superscripts are 0.7 of the font, too small on a phone
        from matplotlib.ticker import NullFormatter

        axes.yaxis.set_major_formatter(lambda value, _: f"{value:.0e}".replace("e+0", "e").replace("e-0", "e-").replace("e+", "e"))
        axes.yaxis.set_minor_formatter(NullFormatter())
    else:
        axes.yaxis.set_major_formatter(lambda value, _: short(value))


def draw_stacked(axes, resolved: list) -> None:
    """One bar per group, its parts stacked in the order they first appear, each bar's total on top."""
    groups = list(dict.fromkeys(group for group, _, _ in resolved))
    parts = list(dict.fromkeys(label for _, label, _ in resolved))
    colors = {label: COLORS[index % len(COLORS)] for index, label in enumerate(parts)}
    totals = []
    for index, group in enumerate(groups):
        bottom = 0.0
        for part in parts:
            value = sum(v for g, label, v in resolved if g == group and label == part)
            if value:
                axes.bar(index, value, 0.7, bottom=bottom, color=colors[part], edgecolor="white", linewidth=0.5,
                         label=part if part not in axes.get_legend_handles_labels()[1] else None)  # fmt: skip
            bottom += value
        totals.append(bottom)
        axes.annotate(short(bottom), (index, bottom), ha="center", va="bottom", fontsize=SMALLEST_PT,
                      xytext=(0, 2), textcoords="offset points")  # fmt: skip
    axes.set_ylim(0, (max(totals) or 1) * 1.18)
    axes.set_xticks(range(len(groups)), [wrap(group, 12 if len(groups) < 4 else 9) for group in groups])
    axes.yaxis.set_major_formatter(lambda value, _: short(value))


def draw_timeline(axes, spec: dict, resolved: list) -> None:
    """One row per (item, rank), the first at the top; each event a bar from its start to its end, one
    colour per kind, its text inside when it fits."""
    kinds = list(dict.fromkeys(kind for _, events in resolved for kind, _, _, _ in events))
    colors = {kind: COLORS[index % len(COLORS)] for index, kind in enumerate(kinds)}
    ends = [end for _, events in resolved for _, _, _, end in events]
    starts = [start for _, events in resolved for _, _, start, _ in events]
    span = (max(ends) - min(0.0, min(starts))) or 1.0
    inch = axes.figure.get_figwidth() * 0.72  # about the plot's width: text fits when its bar is wide enough
    for row, (_, events) in enumerate(resolved):
        y = len(resolved) - 1 - row
        for kind, text, start, end in events:
            axes.barh(y, max(end - start, span / 400), left=start, height=0.7, color=colors[kind], edgecolor="white",
                      linewidth=0.5, label=kind if kind not in axes.get_legend_handles_labels()[1] else None)  # fmt: skip
            room = (end - start) / span * inch * 72  # points
            shown = next((t for t in (text, text.split(" ")[0]) if t and room >= len(t) * SMALLEST_PT * 0.62 + 2), None)
            if shown:  # the rest of the text is in the alt text
                axes.annotate(shown, ((start + end) / 2, y), ha="center", va="center", fontsize=SMALLEST_PT, color="white")
    axes.set_yticks(range(len(resolved)), [wrap(row, 14) for row, _ in reversed(resolved)])
    axes.set_xlim(min(0.0, min(starts)), max(ends))
    axes.set_ylim(-0.6, len(resolved) - 0.4)
    axes.set_xlabel(spec.get("x_label") or "order of events (one slot each)")
    if not spec.get("x_label"):  # against order the slots have no unit: no numbers on the axis
        axes.set_xticks([])
    axes.tick_params(axis="y", length=0)


def draw_lines(axes, spec: dict, resolved: list) -> None:
    for index, (label, points) in enumerate(resolved):
        xs, ys = zip(*points)
        color = COLORS[index % len(COLORS)]
        axes.plot(xs, ys, "o-" if index == 0 else "s--", color=color, label=label)
        for x, y in points:  # the first series labelled above its points, the others below
            axes.annotate(short(y), (x, y), xytext=(6, 6 if index == 0 else -12), textcoords="offset points",
                          fontsize=SMALLEST_PT, color=color)  # fmt: skip
    xs = sorted({x for _, points in resolved for x, _ in points})
    axes.set_xticks(xs, [show(x) for x in xs])
    axes.set_xlabel(spec.get("x_label", ""))
    axes.set_ylim(0, (max(y for _, points in resolved for _, y in points) or 1) * 1.2)
    axes.yaxis.set_major_formatter(lambda value, _: short(value))


def draw_bound(axes, op, bound) -> None:
    if op == "in" and isinstance(bound, list) and len(bound) == 2:
        axes.axhspan(bound[0], bound[1], color="#2a9d5c", alpha=0.15, zorder=0, label=f"expected {show(bound[0])} to {show(bound[1])}")
    elif isinstance(bound, (int, float)) and not isinstance(bound, bool) and (bound > 0 or axes.get_yscale() != "log"):
        name = {"<=": "tolerance", ">=": "bound", "==": "expected"}.get(op, "bound")
        axes.axhline(bound, color="#2a9d5c", linestyle=":", linewidth=1.5, label=f"{name} {show(bound)}")


# --- the site -----------------------------------------------------------------------------------


def path_of(figure_id: str) -> str:
    return f"{FIGURES_DIR}/{figure_id}.svg"


def render_all(pages: list[Page]) -> dict[str, str]:
    """{site path: SVG} for every declared figure whose evidence exists; checks ids are unique."""
    rendered, seen = {}, {}
    for page in pages:
        wrong = problems(page)
        if wrong:
            raise FigureError("\n".join(wrong))
        for spec in declared(page):
            if spec["id"] in seen:
                raise FigureError(f"figure id {spec['id']!r} is declared by {seen[spec['id']]} and {page.path}")
            seen[spec["id"]] = page.path
            try:
                resolved = resolve(spec, page)
                bound = bound_of(spec, page)
            except MissingData:
                continue
            rendered[path_of(spec["id"])] = drawn(spec, resolved, bound)
    return rendered


def drawn(spec: dict, resolved: list, bound, cache_dir: Path | None = None) -> str:
    """`draw`, or the SVG a build drew before from the same inputs (the declaration, the values, this
    module's code and matplotlib's version): a build that changes no figure's evidence redraws none."""
    import matplotlib

    folder = (cache_dir or CACHE_DIR) / "figures"
    inputs = json.dumps([spec, resolved, bound, matplotlib.__version__, hashlib.sha256(Path(__file__).read_bytes()).hexdigest()],
                        sort_keys=True, default=str)  # fmt: skip
    cached = folder / f"{hashlib.sha256(inputs.encode()).hexdigest()}.svg"
    try:
        return cached.read_text(encoding="utf-8")
    except OSError:
        pass
    svg = draw(spec, resolved, bound)
    try:  # written whole or not at all; a read-only checkout just draws again next time
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".tmp", delete=False, encoding="utf-8") as out:
            out.write(svg)
        os.replace(out.name, cached)
    except OSError:
        pass
    return svg


def placeholder(spec: dict, page: Page, why: str) -> str:
    return "\n".join(
        [
            f'!!! info "Figure: {spec["title"]}"',
            f"    Drawn from this machine's evidence at build time; {why}. Make it, then rebuild the site:",
            "",
            "    ```bash",
            f"    python -m pytest verify -k {page.slug} && mkdocs build",
            "    ```",
        ]
    )


def place(markdown: str, page: Page, available) -> str:
    """Each `<!-- figure: ID -->` line becomes the figure, or the command that makes it.

    `available(site_path)` says whether the build holds the figure's SVG.
    """
    up = PurePosixPath(*([".."] * (len(page.path.relative_to(DOCS_DIR).parts) - 1)))
    for spec in declared(page):
        if marker(spec["id"]) not in markdown:
            continue
        try:
            resolved = resolve(spec, page)
            ready = available(path_of(spec["id"]))
            why = "it is not built yet"
        except MissingData as missing:
            ready, why = False, str(missing)
        if ready:
            alt = alt_text(spec, resolved).replace("[", "(").replace("]", ")")
            svg = (up / path_of(spec["id"])).as_posix()
            whose = ("the reference run's evidence" if any((evidence.shown(p) or {}).get("reference") for p in page.proofs)
                     else "this machine's latest evidence")  # fmt: skip
            block = "\n".join(
                [
                    '<figure class="study-figure" markdown="1">',
                    f"[![{alt}]({svg})]({svg}){{ .study-figure-zoom title=\"Enlarge the figure\" }}",
                    f"<figcaption>{spec['title']}. Drawn from {whose}; tap or click it to enlarge.</figcaption>",
                    "</figure>",
                ]
            )
        else:
            block = placeholder(spec, page, why)
        markdown = markdown.replace(marker(spec["id"]), block)
    return markdown


def unused_markers(markdown: str, page: Page) -> list[str]:
    ids = {spec.get("id") for spec in declared(page)}
    return [line for line in markdown.splitlines() if line.startswith("<!-- figure: ") and line[13:-4].strip() not in ids]

