"""The shape of an evidence record and of a matrix summary, checked when either is read back.

Only the parts the harness and the site index into are described (extra keys are allowed, so a record
of a newer harness with more fields still reads): a file with `"claims": [1, 2]`, a claim without
`passed`, `reports: "x"` or `mutants: 5` is unreadable evidence, named, instead of a TypeError in a build.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class Report(Loose):
    rank: Any = None
    measured: Any = None
    control: Any = None
    op: Optional[StrictStr] = None
    bound: Any = None
    details: Optional[dict] = None


class ClaimRecord(Loose):
    id: StrictStr
    passed: StrictBool
    reports: list[Report] = []
    statement: Optional[StrictStr] = None
    reason: Optional[StrictStr] = None
    expected_here: StrictBool = True
    by_value: StrictBool = False


class MutantClaim(Loose):
    id: StrictStr
    killed: StrictBool = False
    how: Optional[StrictStr] = None
    reports: list[Report] = []


class MutantRecord(Loose):
    mutant: StrictStr
    status: StrictStr
    describes: Optional[StrictStr] = None
    reason: Optional[StrictStr] = None
    reached_ranks: list = []
    claims: list[MutantClaim] = []


class EvidenceRecord(Loose):
    claims: list[ClaimRecord]
    page: Optional[StrictStr] = None
    snippet: Optional[StrictStr] = None
    fingerprint: Optional[StrictStr] = None
    date: Optional[StrictStr] = None
    asked: Optional[dict] = None
    versions: Optional[dict] = None
    launch: Optional[dict] = None
    mutants: Optional[list[MutantRecord]] = None


class MatrixRow(Loose):
    snippet: StrictStr
    claim: StrictStr
    outcome: StrictStr
    verdict: StrictStr
    page: Optional[StrictStr] = None


class MatrixSummary(Loose):
    claims: list[MatrixRow]
    release: Optional[StrictStr] = None
