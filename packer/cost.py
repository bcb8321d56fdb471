"""A sample's cost (``--cost FIELD``): a non-negative integer read from its record's JSON member, parsed
once more in the packing process (a few microseconds a small record; the workers stay as they are).
The rule itself is the core's (``shardstream/format/costfield.py``), shared with ``index --cost``."""

from __future__ import annotations

from shardstream.format.costestimate import estimate_cost, estimate_parameters, is_estimate
from shardstream.format.costfield import BAD_COST, MAX_COST, RECORD_MEMBER, BadCost, record_cost

from .sample import Reject, Sample

__all__ = ["BAD_COST", "MAX_COST", "RECORD_MEMBER", "sample_cost"]


def sample_cost(sample: Sample, field: str) -> int | Reject:
    """The value of ``field`` in the sample's record, if a non-negative integer (an integral float such as
    12.0 counts as 12); else a ``bad-cost`` reject naming the sample and the field. ``@estimate[:...]``:
    the built-in estimate from the sample's members instead (``format/costestimate.py``)."""
    try:
        if is_estimate(field):
            return estimate_cost(sample.members, estimate_parameters(field))
        data = next((data for ext, data in sample.members if ext == RECORD_MEMBER), None)
        return record_cost(data, field)
    except BadCost as exc:
        return Reject(sample.source, f"sample {sample.key!r}: {exc}", BAD_COST)
