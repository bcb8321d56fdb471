"""A sample's cost read from a field of its JSON record: one rule for ``pack --cost`` and ``index --cost``;
the record is parsed whole for one field (a few microseconds a small record)."""

from __future__ import annotations

import json
import math

BAD_COST = "bad-cost"  # the reject kind of a sample whose cost field is missing or not a count
RECORD_MEMBER = "json"  # the member holding the record: a manifest's row, a folder's KEY.json, a tar's .json
MAX_COST = 2**64 - 1  # the .cols column is u8


class BadCost(ValueError):
    """Why a record gives no cost (the reason only; the caller names the sample and where it is)."""


def record_cost(data: bytes | None, field: str) -> int:
    """The value of ``field`` in the JSON record ``data`` (None: the sample has no record member), if a
    non-negative integer (an integral float such as 12.0 counts as 12); else BadCost saying why."""
    if data is None:
        raise BadCost(f"cost field {field!r} has no {RECORD_MEMBER} member to read it from")
    try:
        record = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise BadCost(
            f"cost field {field!r} cannot be read: its {RECORD_MEMBER} member is not JSON ({exc})"
        ) from None
    if not isinstance(record, dict) or field not in record:
        raise BadCost(f"cost field {field!r} is missing from its record")
    value = record[field]
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COST:
        raise BadCost(f"cost field {field!r} is {json.dumps(value)[:40]}, not an integer from 0 to 2**64-1")
    return value
