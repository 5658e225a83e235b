"""Report what a proof measured, next to its negative control, in one JSON line per claim.

A claim holds only when the measurement meets the expectation AND the control, the same measurement
with the claimed mechanism removed, does not. A check whose control also passes proves nothing.

Run a snippet by hand and each rank prints its verdicts; under `pytest verify` the harness sets
PROOF_REPORT_FILE and judges the lines itself with `evaluate` below.
"""

import json
import math
import os

RELATIONS = {
    "<=": lambda value, bound: value <= bound,
    ">=": lambda value, bound: value >= bound,
    "==": lambda value, bound: value == bound,
    "!=": lambda value, bound: value != bound,
    "in": lambda value, bound: bound[0] <= value <= bound[1],
}


def _rank():
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except ImportError:
        pass
    return int(os.environ.get("RANK", 0))


def _plain(value):
    """Tensors and numpy scalars become JSON numbers; NaN stays visible as a string."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


NON_FINITE = ("nan", "inf", "-inf")  # how `_plain` writes a float that is not a number


def kind(value):
    """What sort of measurement a value is; None for one that measured nothing (None, NaN, inf)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number" if math.isfinite(value) else None
    if isinstance(value, str):
        return None if value in NON_FINITE else "text"
    if isinstance(value, (list, tuple)):
        return "list"
    return type(value).__name__


def not_measured(value, op, bound):
    """Why `value` is no measurement to compare with `bound` (None when it is one): it measured nothing,
    or it is of another kind than the bound. Values are never compared across kinds: a control that
    crashed and reported None, NaN or its error text must not count as "missed the bound". A control
    that legitimately finds nothing reports a sentinel of the bound's kind (e.g. "no exception")."""
    found = kind(value)
    if found is None:
        return f"measured nothing ({value!r})"
    wanted = "number" if op == "in" else kind(bound)
    if found != wanted:
        return f"is {found} ({value!r}), the bound {wanted} ({bound!r}): values of different kinds are not compared"
    return None


def evaluate(measured, op, bound):
    """True when `measured op bound` holds; a value that measured nothing, or of another kind than the
    bound, never holds."""
    if not_measured(measured, op, bound):
        return False
    return bool(RELATIONS[op](measured, bound))


def verdict(record):
    """(passed, holds, control_holds): passed needs both a measurement that meets the bound and a
    control that was measured too, and misses it."""
    holds = evaluate(record["measured"], record["op"], record["bound"])
    control_holds = evaluate(record["control"], record["op"], record["bound"])
    control_measured = not not_measured(record["control"], record["op"], record["bound"])
    return holds and control_measured and not control_holds, holds, control_holds


def report(claim, measured, control, op, bound, **details):
    """Record one claim: `measured op bound` must hold and `control op bound` must not.

    `details` carries extra numbers worth showing on the page (sizes, timings); they are not judged.
    """
    if op not in RELATIONS:
        raise ValueError(f"unknown relation {op!r}; use one of {sorted(RELATIONS)}")
    record = {
        "claim": claim,
        "rank": _rank(),
        "measured": _plain(measured),
        "control": _plain(control),
        "op": op,
        "bound": _plain(bound),
        "details": {key: _plain(value) for key, value in details.items()},
    }
    passed, holds, control_holds = verdict(record)
    sink = os.environ.get("PROOF_REPORT_FILE")
    if sink:
        # Named by the launcher's RANK, as the harness names each process's status file: two processes
        # that disagree about their torch rank must not write into one file.
        with open(sink.format(rank=os.environ.get("RANK", record["rank"])), "a") as out:
            out.write(json.dumps(record) + "\n")
    print(
        f"[rank {record['rank']}] {'PASS' if passed else 'FAIL'} {claim}: "
        f"measured {record['measured']} {op} {record['bound']} -> {holds}; "
        f"control {record['control']} -> {control_holds} (must be False)"
        + (f"; not measured: the control {why}" if (why := not_measured(record["control"], op, record["bound"])) else ""),
        flush=True,
    )
    return passed


def at_most(claim, measured, control, tolerance, **details):
    """measured <= tolerance (a difference, an error); the control must exceed it."""
    return report(claim, measured, control, "<=", tolerance, **details)


def at_least(claim, measured, control, bound, **details):
    return report(claim, measured, control, ">=", bound, **details)


def equal(claim, measured, control, expected, **details):
    """measured == expected exactly (counts, dtypes, device names); the control must differ."""
    return report(claim, measured, control, "==", expected, **details)


def between(claim, measured, control, low, high, **details):
    return report(claim, measured, control, "in", [low, high], **details)
