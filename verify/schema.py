"""The front matter a page (or a lab's header) may declare, as a pydantic schema.

One schema instead of scattered checks: an unknown key (`proof:`, `timout:`) or a bad value
(`processes: "two"`, `since: "1.x"`, `snippet: ../x.py`) makes that page alone fail, and the error
names the file and the line of the offending key (`located` maps pydantic's error location back onto
the YAML nodes).
"""

from __future__ import annotations

import datetime
import re
from typing import Annotated, Literal, Optional

import yaml
from packaging.version import InvalidVersion, Version
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError, model_validator

DIFFICULTIES = ("junior", "mid", "senior")
# A claim id becomes a pytest id, an HTML anchor and a `-k` word: plain identifiers only.
CLAIM_ID = re.compile(r"[a-z0-9_]+")
# A snippet is a plain file name inside snippets/ (no folder, no `..`, no glob characters).
SNIPPET_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*\.py$"
MUTANT_NAME = r"^[a-z0-9]+(-[a-z0-9]+)*$"  # lower-case-with-dashes (MUTANTS-SPEC.md)
# A source id is a `-k` word and an HTML anchor like a claim id, but must start with a letter.
SOURCE_ID = re.compile(r"[a-z][a-z0-9_]*")
# Where a checked quote is (data/levels-spec.md): a dated excerpt in data/excerpts/, or an installed package's
# file by its path under site-packages (relative, no `..`, no backslashes).
SOURCE_IN = r"^(excerpt:[a-z0-9][a-z0-9._-]*|installed:[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*)$"


def _release(value: str) -> str:
    try:
        Version(value)
    except InvalidVersion:
        raise ValueError(f"{value!r} is not a release number such as 1.0.0") from None
    return value


Release = Annotated[StrictStr, AfterValidator(_release)]
Positive = Annotated[StrictInt, Field(ge=1)]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]  # strict: 120 and 1.5 pass, "abc" and 0 do not


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


MutantNames = Annotated[list[Annotated[StrictStr, Field(pattern=MUTANT_NAME)]], Field(min_length=1)]


class ClaimEntry(Strict):
    says: StrictStr
    control: Optional[StrictStr] = None
    since: Optional[Release] = None
    until: Optional[Release] = None
    breaks_when: Optional[MutantNames] = None  # each must make the MEASURED value miss its bound
    # each must make the claim fail through its control: the wrong answer describes the world without the
    # mechanism, which is the path the control runs (e.g. "no_sync still all-reduces")
    breaks_control_when: Optional[MutantNames] = None
    no_mutant: Optional[Annotated[StrictStr, Field(min_length=1)]] = None
    # evidence level (data/levels-spec.md): a claim runs a measurement unless it declares a model;
    # a claim in a `requires: cuda` proof is GPU-ready whatever it declares here
    level: Optional[Literal["measured", "modelled"]] = None
    # the arguments this claim's run leaves out, so that it reads their defaults (verify/website/prose.py)
    omits: Optional[Annotated[list[StrictStr], Field(min_length=1)]] = None

    @model_validator(mode="before")
    @classmethod
    def sentence_alone(cls, value):
        return {"says": value} if isinstance(value, str) else value  # `claim_id: sentence` is short for says

    @model_validator(mode="after")
    def one_mutant_statement(self):
        named = (self.breaks_when or []) + (self.breaks_control_when or [])
        if named and self.no_mutant is not None:
            raise ValueError("a claim has either breaks_when/breaks_control_when or no_mutant, not both")
        twice = sorted(set(self.breaks_when or []) & set(self.breaks_control_when or []))
        if twice:
            raise ValueError(f"mutant(s) {twice} named in both breaks_when and breaks_control_when")
        return self

    @model_validator(mode="after")
    def a_range_with_releases_in_it(self):
        if self.since and self.until and Version(self.since) > Version(self.until):
            raise ValueError(f"since {self.since} is later than until {self.until}: the claim could hold on no release")
        return self


def _claim_ids(claims: dict) -> dict:
    bad = [claim_id for claim_id in claims if not CLAIM_ID.fullmatch(claim_id)]
    if bad:
        raise ValueError(f"claim id(s) {bad} must be lower-case letters, digits and underscores")
    return claims


Claims = Annotated[dict[StrictStr, ClaimEntry], Field(min_length=1), AfterValidator(_claim_ids)]


def _source_in(value: str) -> str:
    if not re.fullmatch(SOURCE_IN, value):
        raise ValueError(f"{value!r} is neither excerpt:NAME (data/excerpts/NAME.md) nor installed:PATH (a file "
                         "under site-packages, e.g. installed:torch/distributed/distributed_c10d.py)")
    return value


class SourceEntry(Strict):
    """A checked quote (evidence level "sourced"): its exact words, where they are, and what they back."""

    quote: Annotated[StrictStr, Field(min_length=1)]
    in_: Annotated[StrictStr, Field(alias="in"), AfterValidator(_source_in)]
    backs: Annotated[StrictStr, Field(min_length=1)]

    @model_validator(mode="after")
    def words_to_find(self):
        if not " ".join(self.quote.replace("...", " ").replace("\u2026", " ").split()):
            raise ValueError("a quote must have words to find, not only '...'")
        return self


def _source_ids(sources: dict) -> dict:
    bad = [source_id for source_id in sources if not SOURCE_ID.fullmatch(source_id)]
    if bad:
        raise ValueError(f"source id(s) {bad} must be lower_snake: a letter, then lower-case letters, digits, underscores")
    return sources


Sources = Annotated[dict[StrictStr, SourceEntry], AfterValidator(_source_ids)]


class ExcerptMeta(Strict):
    """The front matter of data/excerpts/<name>.md: a source that is not installed, pinned and dated."""

    title: Annotated[StrictStr, Field(min_length=1)]
    url: Annotated[StrictStr, Field(pattern=r"^https?://\S+$")]
    at: Annotated[StrictStr, Field(min_length=1)]  # a tag, a commit, or a paper's arXiv id, version and section
    retrieved: Annotated[datetime.date, Field(strict=False)]  # 2026-12-01, quoted or not


class ProofEntry(Strict):
    snippet: Annotated[StrictStr, Field(pattern=SNIPPET_NAME)]
    claims: Claims
    timeout: Optional[Seconds] = None
    requires: Optional[Literal["cuda"]] = None
    processes: Optional[Positive] = None
    nodes: Optional[Positive] = None


class LabHeader(Strict):
    """A lab's `jupyter: proof:` block."""

    title: Optional[StrictStr] = None
    claims: Claims
    timeout: Optional[Seconds] = None
    processes: Optional[Positive] = None


class PageMeta(Strict):
    """Every top-level key a page may have; the parts other modules check in depth stay loose here."""

    title: Optional[StrictStr] = None
    difficulty: Optional[Literal[DIFFICULTIES]] = None  # type: ignore[valid-type]
    tags: Optional[list[StrictStr]] = None
    order: Optional[StrictInt] = None
    key_facts: Optional[list[dict]] = None  # checked by verify/website/study.py
    handout_errors: Optional[list[dict]] = None  # checked by the errata table (verify/website/hooks.py)
    figures: Optional[list] = None  # checked by verify/website/figures.py, with the page's claim ids
    sources: Optional[Sources] = None  # checked quotes (evidence level "sourced", data/levels-spec.md)
    proofs: Optional[list[ProofEntry]] = None
    # mkdocs-material's own page settings
    hide: Optional[list[StrictStr]] = None
    search: Optional[dict] = None
    description: Optional[StrictStr] = None
    template: Optional[StrictStr] = None


def line_of(node, location: tuple) -> int | None:
    """The 0-based line of the YAML node at pydantic's error location (the deepest one that exists)."""
    found = node
    for step in location:
        if isinstance(found, yaml.MappingNode):
            match = [(key, value) for key, value in found.value if key.value == str(step)]
            if not match:
                break
            key, value = match[0]
            found = value if isinstance(value, (yaml.MappingNode, yaml.SequenceNode)) else key
            if found is key:
                break
        elif isinstance(found, yaml.SequenceNode) and isinstance(step, int) and step < len(found.value):
            found = found.value[step]
        else:
            break
    return found.start_mark.line if found is not None else None


def located(error: ValidationError, node, first_line: int, under: tuple = ()) -> list[str]:
    """'LINE: where: what' for each problem; `first_line` is the file line of the YAML text's line 0,
    `under` the keys above the validated mapping in that YAML (a lab's `jupyter: proof:`)."""
    problems = []
    for item in error.errors():
        path = tuple(step for step in item["loc"] if step != "[key]")
        line = line_of(node, under + path) if node is not None else None
        where = ".".join(str(step) for step in path) or "front matter"
        what = item["msg"] if item["type"] != "extra_forbidden" else "unknown key (a typo?)"
        problems.append(f"{(line or 0) + first_line}: {where}: {what}")
    return problems
