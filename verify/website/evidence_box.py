"""The evidence box a reader sees under a proof, and the worlds of the mutants a page names.

Site side only (verify/website/hooks.py and verify/website/lab_pages.py call it): it reads the evidence the harness
wrote and never runs anything. Everything taken from evidence or front matter is HTML-escaped.

- `box(proof, slug)`: each claim as a row (a card on a phone) that leads with its sentence, then what was
  measured and what the negative control gave, with units and exact integers, then the verdict; the
  claim id comes last. Above the rows, where and when it was measured, and whether the evidence
  predates the code shown (its fingerprint differs). Below them, the mutants: the proof run in a
  world where the library is broken on purpose, and whether each claim failed there as it must.
- `mutant_note(name, page)`: the short admonition at a `<!-- mutant: NAME -->` line of a page.
"""

from __future__ import annotations

import datetime
import html
import re

from verify import evidence
from verify.pages import Page, Proof

MUTANT_MARKER = re.compile(r"^( *)<!-- mutant: ([A-Za-z0-9_.-]+) -->[ \t]*$", re.M)
RELATION_WORDS = {"<=": "at most", ">=": "at least", "==": "exactly", "!=": "anything but", "in": "between"}
RELATION_SIGNS = {"<=": "≤", ">=": "≥", "==": "=", "!=": "≠", "in": "in"}
# A claim id or detail name says what it counts; the word decides the unit shown after the number.
UNITS = (
    (re.compile(r"(^|_)(bytes)(_|$)"), "bytes"),
    (re.compile(r"(^|_)(seconds)(_|$)"), "s"),
    (re.compile(r"(^|_)(ms)(_|$)"), "ms"),
    (re.compile(r"(^|_)(steps)$"), "steps"),
    (re.compile(r"(^|_)(percent|pct)(_|$)"), "%"),
    (re.compile(r"(^|_)(mb|mib)(_|$)"), "MiB"),
)


def esc(value) -> str:
    return html.escape(str(value), quote=True)


# HTML's specials and Markdown's marks as entities, in one pass (a second pass would break the first's '&#').
MARKDOWN_SAFE = {ord(char): f"&#{ord(char)};" for char in "&<>\"'*_`[]\\#|~"}


def md_text(value) -> str:
    """Text that goes into Markdown (an admonition body): HTML-escaped, and Markdown's own marks made inert."""
    return str(value).translate(MARKDOWN_SAFE)


def number(value) -> str:
    """A number as a reader writes it: integers whole (32768), others to 4 significant digits."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return str(value)
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        if 1e-3 <= abs(value) < 1e6:
            return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.1f}"
        return f"{value:.3g}"
    if isinstance(value, list):
        return "[" + ", ".join(number(item) for item in value) + "]"
    if isinstance(value, dict):
        return ", ".join(f"{key}: {number(item)}" for key, item in value.items())
    if value is None:
        return "nothing"
    return str(value)


def unit_of(name: str) -> str:
    for pattern, unit in UNITS:
        if pattern.search(name.lower()):
            return unit
    return ""


def with_unit(value, unit: str) -> str:
    text = number(value)
    if not unit or not isinstance(value, (int, float)) or isinstance(value, bool):
        return text
    return f"{text}%" if unit == "%" else f"{text} {unit}"


def expectation(op: str, bound, unit: str) -> str:
    if op == "in" and isinstance(bound, list) and len(bound) == 2:
        return f"between {with_unit(bound[0], unit)} and {with_unit(bound[1], unit)}"
    return f"{RELATION_WORDS.get(op, op)} {with_unit(bound, unit)}"


def when(date: str | None) -> str:
    """'2 January 2026' from an ISO date."""
    try:
        day = datetime.datetime.fromisoformat(str(date)).date()
    except ValueError:
        return str(date or "an unknown date")
    return f"{day.day} {day.strftime('%B %Y')}"


def machine(found: dict) -> str:
    """The machine in words: the reference set names it; otherwise its system and processor type."""
    if found.get("machine"):
        return str(found["machine"])
    system = str(found.get("platform") or "")
    kind = next((name for name in ("Linux", "macOS", "Windows") if name.lower() in system.lower()), "")
    arch = next((name for name in ("x86_64", "arm64", "aarch64") if name in system), "")
    return " ".join(part for part in (kind, arch, "machine") if part) if kind or arch else ""


def where_and_when(found: dict) -> str:
    devices = sorted({str(device).split(":")[0] for device in (found.get("device_per_rank") or {}).values() if device})
    on = {"cpu": "the CPU", "cuda": "GPUs"}.get(devices[0], devices[0]) if len(devices) == 1 else ", ".join(devices) or "an unrecorded device"
    versions = ", ".join(f"{name} {version}" for name, version in (found.get("versions") or {}).items() if version)
    seconds = found.get("snippet_seconds")
    took = f" The proof ran for {seconds:.2f} s." if isinstance(seconds, (int, float)) else ""
    size = found.get("world_size")
    day = when(found.get("date"))
    if found.get("reference"):
        whose = (f"Reference evidence, measured on {day} on {machine(found) or 'a reference machine'} (not the "
                 "machine that built this site)")  # fmt: skip
    else:
        what = f" ({machine(found)})" if machine(found) else ""
        whose = f"Measured on {day} on the machine that built this site{what}"
    return (f"{whose}: {size} processes on {on}, talking over {found.get('backend') or 'an unrecorded backend'}; "
            f"{versions}.{took}")  # fmt: skip


def stale(found: dict, proof: Proof | None) -> bool:
    """The recorded fingerprint differs from that of the code shown (default settings: 2 processes, CPU)."""
    recorded = found.get("fingerprint")
    if not recorded or proof is None or not proof.path.exists():
        return False
    from verify.runner import LaunchSettings

    return recorded != evidence.fingerprint(proof, LaunchSettings(num_processes=proof.world_size(2), use_cpu=True))


def breakable(claim_id: str) -> str:
    """A claim id that may wrap after its underscores only, never inside a word."""
    return esc(claim_id).replace("_", "_<wbr>")


def versions_differ(found: dict) -> tuple[str, str] | None:
    """(theirs, ours) in words when the evidence was measured with other package versions than installed here."""
    recorded = found.get("versions") or {}
    installed = evidence.versions()
    names = [name for name in installed if recorded.get(name) != installed[name]]
    if not names or not recorded:
        return None
    return (", ".join(f"{name} {recorded.get(name) or 'none'}" for name in names),
            ", ".join(f"{name} {installed[name] or 'none'}" for name in names))  # fmt: skip


def claim_anchor(claim_id: str) -> str:
    return f"claim-{claim_id}"


def values_by_rank(reports: list, key: str, unit: str) -> str:
    """'1.25e-08 (rank 0), 0 (rank 1)', or one value when every rank measured the same."""
    groups: dict = {}
    for report in reports:
        groups.setdefault(with_unit(report.get(key), unit), []).append(str(report.get("rank", "?")))
    if len(groups) == 1:
        value, ranks = next(iter(groups.items()))
        every = "every rank" if len(ranks) > 1 else f"rank {ranks[0]}"
        return f'<span class="ev-value">{esc(value)}</span> <span class="ev-ranks">({esc(every)})</span>'
    return "; ".join(
        f'<span class="ev-value">{esc(value)}</span> <span class="ev-ranks">(rank{"s" if len(ranks) > 1 else ""} '
        f'{esc(", ".join(ranks))})</span>'
        for value, ranks in groups.items()
    )


def verdict_words(claim: dict, declared) -> tuple[str, str]:
    """(class, words) of a claim's outcome."""
    if claim.get("expected_here", True):
        if claim["passed"]:
            return "held", "Held: the measurement met the bound and the control did not."
        return "failed", "FAILED: " + str(claim.get("reason") or "the claim did not hold")
    span = f"{declared.since or 'any'} to {declared.until or 'now'}" if declared else "its releases"
    if claim["passed"]:
        return "failed", f"HOLDS outside its declared releases ({span}): the page's range is wrong."
    if not claim.get("by_value", False):  # a crash, a hang or a missing report shows nothing either way
        return "failed", "FAILED: crashed: nothing was measured: " + str(claim.get("reason") or "the run did not finish")
    return "held", f"Does not hold on this release, as the page declares (it holds on {span})."


def claim_row(claim: dict, declared: dict) -> str:
    claim_id = str(claim["id"])
    known = declared.get(claim_id)
    says = known.says if known else claim.get("statement", "")
    removes = (known.control if known else None) or claim.get("control_removes")
    reports = claim.get("reports") or []
    unit = unit_of(claim_id)
    kind, words = verdict_words(claim, known)
    cells = []
    if reports:
        first = reports[0]
        cells.append(("Measured", values_by_rank(reports, "measured", unit)))
        cells.append(("Needs", esc(expectation(first.get("op", "?"), first.get("bound"), unit))))
        control = values_by_rank(reports, "control", unit)
        if removes:
            control += f'<span class="ev-removes">with {esc(removes)}</span>'
        cells.append(("Control", control + " <span class=\"ev-must\">(must miss the bound)</span>"))
    else:
        cells.append(("Measured", "nothing: no rank reported this claim"))
    details = (reports[0].get("details") if reports else None) or {}
    also = ""
    if details:
        items = "; ".join(f"{esc(key.replace('_', ' '))} {esc(with_unit(value, unit_of(key)))}" for key, value in details.items())
        also = f'<p class="ev-also">Rank {esc(reports[0].get("rank", "?"))} also measured: {items}.</p>'
    numbers = "".join(f'<div class="ev-cell"><dt>{name}</dt><dd>{value}</dd></div>' for name, value in cells)
    return (
        f'<div class="ev-claim ev-claim--{kind}" id="{esc(claim_anchor(claim_id))}">'
        f'<p class="ev-says">{esc(says)}</p>'
        f'<dl class="ev-numbers">{numbers}</dl>'
        f'<p class="ev-verdict ev-verdict--{kind}">{esc(words)}</p>{also}'
        f'<p class="ev-id">claim <code>{breakable(claim_id)}</code></p>'
        "</div>"
    )


MUTANT_STATUS = {
    "killed": ("held", "the claim failed there, as it must: this proof would catch that bug."),
    "survived": ("failed", "the claim still held there: this proof would NOT catch that bug."),
    "crashed": ("failed", "the proof crashed there instead of measuring: a crash is not a catch."),
    "not_reached": ("failed", "the proof never reached the code this bug changes."),
    "not_reported": ("failed", "the proof ran there but did not report the claim."),
    "not_run": ("neutral", "not run yet."),
}


def mutant_outcome(claim: dict, report: dict, unit: str, failed: str, held: str) -> str:
    """How a claim came out in a mutant's world. A measurement that still meets its bound fails the claim only
    because the control met it too (the mutant made the control's world the same as the claim's): say so,
    or a reader sees a value within the bound next to 'the claim failed'."""
    if not claim.get("killed"):
        return f"{held} ({claim.get('how', '')})"
    if claim.get("how") == "the control met the bound" and report.get("control") is not None:
        return f"the control measured {with_unit(report['control'], unit)} and met it too, so {failed}"
    return failed


def mutant_claim_line(entry: dict, claim: dict, declared: dict) -> str:
    claim_id = str(claim.get("id", "?"))
    unit = unit_of(claim_id)
    report = (claim.get("reports") or [{}])[0]
    says = declared[claim_id].says if claim_id in declared else claim_id
    measured = with_unit(report.get("measured"), unit) if report else "nothing"
    needs = expectation(report.get("op", "?"), report.get("bound"), unit) if report else "?"
    outcome = mutant_outcome(claim, report, unit, "the claim failed", "the claim still held")
    return (f'<li>“{esc(says)}” measured <span class="ev-value">{esc(measured)}</span> on rank '
            f'{esc(report.get("rank", "?"))}, needs {esc(needs)}: <strong>{esc(outcome)}</strong>.'
            f' <span class="ev-id">claim <code>{esc(claim_id)}</code></span></li>')  # fmt: skip


def mutant_rows(found: dict, declared: dict) -> str:
    entries = found.get("mutants") or []
    if not entries:
        return ""
    rows = []
    for entry in entries:
        kind, words = MUTANT_STATUS.get(str(entry.get("status")), ("neutral", str(entry.get("status"))))
        claims = "".join(mutant_claim_line(entry, claim, declared) for claim in entry.get("claims") or [])
        rows.append(
            f'<div class="ev-mutant ev-mutant--{kind}" id="mutant-{esc(entry.get("mutant", ""))}">'
            f'<p class="ev-says">Broken on purpose: {esc(entry.get("describes") or entry.get("mutant"))}.</p>'
            f'<ul class="ev-mutant-claims">{claims}</ul>'
            f'<p class="ev-verdict ev-verdict--{kind}">In that world {esc(words)}</p>'
            f'<p class="ev-id">mutant <code>{esc(entry.get("mutant", "?"))}</code></p></div>'
        )
    return ('<p class="ev-heading">The same proof in worlds where the library is broken on purpose (mutants):</p>'
            + "".join(rows))  # fmt: skip


def box(proof: Proof, slug: str) -> str:
    """The evidence box (Markdown with one raw HTML block) for a proof of page `slug`."""
    declared = proof.claims
    found = evidence.shown(proof)
    rerun = f"python -m pytest verify -k {slug}"
    if proof.requires == "cuda" and not found:
        return gpu_ready_box(proof, slug)
    anchors = "".join(f'<span id="{esc(claim_anchor(c))}"></span>' for c in declared)
    listing = "\n".join(f"- **{md_text(c)}**: {md_text(declared[c].says)}" for c in declared)
    command = f"    Run the proof, then rebuild the site:\n\n    ```bash\n    {rerun}\n    ```"
    if not found:
        return f'!!! info "No evidence from this machine yet"\n{command}\n\n    {anchors}\n\n' + indent(listing)
    if not evidence.matches_claims(found, declared):
        return (f'!!! warning "The evidence on this machine predates the claims this page now makes"\n{command}\n\n'
                f"    {anchors}\n\n" + indent(listing))  # fmt: skip
    passed = all(evidence.as_declared(claim) for claim in found["claims"])
    kind = "success" if passed else "failure"
    title = "Evidence: every claim held" if passed else "Evidence: a claim FAILED"
    if passed and found.get("reference"):
        title += " (reference run)"
    notes = [f'<p class="ev-where">{esc(where_and_when(found))}</p>']
    other_versions = versions_differ(found)
    if stale(found, proof) and other_versions:
        notes.append(f'<p class="ev-stale">Measured with {esc(other_versions[0])}; this site was built with '
                     f"{esc(other_versions[1])}. Rerun it to measure yours: <code>{esc(rerun)}</code>.</p>")  # fmt: skip
    elif stale(found, proof):
        notes.append(
            '<p class="ev-stale">This evidence was measured on an earlier version of this snippet (or of its '
            "helpers or the harness) than the code shown above. Rerun it: "
            f"<code>{esc(rerun)}</code>.</p>"
        )
    elif found.get("reference"):
        notes.append(f'<p class="ev-rerun">Replace it with your own machine\'s: <code>{esc(rerun)}</code>, '
                     "then rebuild the site.</p>")  # fmt: skip
    notes.append(levels_note(proof, found))
    rows = "".join(claim_row(claim, declared) for claim in found["claims"])
    return (
        f'<div class="admonition {kind} evidence-box" markdown="0" data-search-exclude>'
        f'<p class="admonition-title">{esc(title)}</p>'
        + "".join(notes)
        + f'<div class="ev-claims">{rows}</div>'
        + mutant_rows(found, declared)
        + "</div>"
    )


def indent(text: str, spaces: int = 4) -> str:
    return "\n".join((" " * spaces + line) if line else "" for line in text.splitlines())


# --- evidence levels (data/levels-spec.md) ------------------------------------------------------


def levels_note(proof: Proof, found: dict | None) -> str:
    """This proof's claims per evidence level, in words ('3 measured, 1 modelled')."""
    if proof.requires == "cuda":
        words = f"{len(proof.claims)} GPU-ready" + (", run on a GPU" if found else ", not yet run on a GPU")
    else:
        counts: dict = {}
        for claim in proof.claims.values():
            counts[claim.level or "measured"] = counts.get(claim.level or "measured", 0) + 1
        words = ", ".join(f"{count} {level}" for level, count in sorted(counts.items()))
    return f'<p class="ev-levels">Evidence level of these claims: {esc(words)}.</p>'


def gpu_ready_box(proof: Proof, slug: str) -> str:
    """A proof that needs CUDA, with no evidence yet: written, and skipped on a machine without GPUs."""
    listing = "\n".join(f"- **{md_text(c)}**: {md_text(proof.claims[c].says)}" for c in proof.claims)
    anchors = "".join(f'<span id="{esc(claim_anchor(c))}"></span>' for c in proof.claims)
    return (f'!!! info "GPU-ready, not yet run on a GPU"\n'
            f"    This proof needs CUDA (`requires: cuda`): on a machine without GPUs `pytest verify` skips it, "
            f"so nothing here has been measured yet. On a machine with GPUs:\n\n"
            f"    ```bash\n    python -m pytest verify -k {slug}\n    ```\n\n    {anchors}\n\n" + indent(listing))


def mutant_note(name: str, page: Page) -> str:
    """The admonition at `<!-- mutant: NAME -->`: that world's measurement of the claims it breaks."""
    for proof in page.proofs:
        found = evidence.shown(proof)
        entry = next((m for m in (found or {}).get("mutants") or [] if m.get("mutant") == name), None)
        if entry is None:
            continue
        kind, words = MUTANT_STATUS.get(str(entry.get("status")), ("neutral", str(entry.get("status"))))
        lines = []
        for claim in entry.get("claims") or []:
            claim_id = str(claim.get("id", "?"))
            report = (claim.get("reports") or [{}])[0]
            unit = unit_of(claim_id)
            outcome = mutant_outcome(claim, report, unit, "the claim fails", "the claim still holds")
            lines.append(
                f"- the proof measured **{md_text(with_unit(report.get('measured'), unit))}**, needs "
                f"{md_text(expectation(report.get('op', '?'), report.get('bound'), unit))}: {outcome} "
                f'(<a href="#{esc(claim_anchor(claim_id))}"><code>{esc(claim_id)}</code></a>)'
            )
        admonition = {"held": "bug", "failed": "failure"}.get(kind, "note")
        body = "\n".join(lines) or md_text(words)
        title = f"In a world where {entry.get('describes') or name}"
        return f'!!! {admonition} "{md_text(title)}"\n' + indent(body + f"\n\nIn that world {md_text(words)}")
    return (f'!!! note "Broken on purpose: {md_text(name)}"\n'
            f"    The proof has not been run in this world yet: `python -m pytest verify -k {page.slug} --mutants`")


def place_mutants(markdown: str, page: Page) -> str:
    def replace(match):
        return indent(mutant_note(match.group(2), page), len(match.group(1))) if match.group(1) else mutant_note(
            match.group(2), page
        )

    return MUTANT_MARKER.sub(replace, markdown)
