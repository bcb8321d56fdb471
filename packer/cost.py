"""A sample's cost (``--cost FIELD``): a non-negative integer read from its record's JSON member, parsed
once more in the packing process (a few microseconds a small record; the workers stay as they are)."""

from __future__ import annotations

import json
import math

from .sample import Reject, Sample

BAD_COST = "bad-cost"  # the reject kind of a sample whose cost field is missing or not a count
RECORD_MEMBER = "json"  # the member holding the record: a manifest's row, a folder's KEY.json
MAX_COST = 2**64 - 1  # the .cols column is u8


def sample_cost(sample: Sample, field: str) -> int | Reject:
    """The value of ``field`` in the sample's record, if a non-negative integer (an integral float such as
    12.0 counts as 12); else a ``bad-cost`` reject naming the sample and the field."""
    data = next((data for ext, data in sample.members if ext == RECORD_MEMBER), None)
    if data is None:
        return _bad(sample, field, f"has no {RECORD_MEMBER} member to read it from")
    try:
        record = json.loads(data)
    except (ValueError, RecursionError) as exc:
        return _bad(sample, field, f"cannot be read: its {RECORD_MEMBER} member is not JSON ({exc})")
    if not isinstance(record, dict) or field not in record:
        return _bad(sample, field, "is missing from its record")
    value = record[field]
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COST:
        return _bad(sample, field, f"is {json.dumps(value)[:40]}, not an integer from 0 to 2**64-1")
    return value


def _bad(sample: Sample, field: str, why: str) -> Reject:
    return Reject(sample.source, f"sample {sample.key!r}: cost field {field!r} {why}", BAD_COST)
