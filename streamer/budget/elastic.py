"""Elastic resume of budgeted batches: what an epoch has left, dealt again by cost to any ranks x workers.

The epoch's stream (``elastic/deal.py``'s positions, the shard order laid end to end) is weighed by cost
as the overlong rule keeps it (``deal.WeighedStream``). A budgeted worker's slice is one span of that
stream (``deal.slot_span``, what ``deal.cost_segments`` reads), so the elastic machinery finds
what each old worker left (its unread span, the ids its shuffle buffer and its batcher's window held) as
for samples; ``deal_by_cost`` then cuts that leftover into equal-cost parts for the new world, ids first
(they are few: buffers and windows), and every new worker yields the same number of batches again, a
target computed from the cost left. Memory: O(shards) for the sums, a few shards' columns at a time.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..elastic.deal import Plan, Span
from .deal import WeighedStream, slot_bounds


def left_cost(stream: WeighedStream, left: Plan) -> int:
    """What ``left`` weighs: its ids' costs and its spans'."""
    spans = sum(stream.cost_before(b) - stream.cost_before(a) for a, b in left.spans)
    return int(stream.id_costs(left.ids).sum()) + spans


def deal_by_cost(
    stream: WeighedStream, left: Plan, *, rank: int, world: int, worker: int, workers: int
) -> Plan:
    """This place's equal-cost part of ``left``: ids first, then the spans, cut where the cost says."""
    slots, slot = world * workers, rank * workers + worker
    id_costs = stream.id_costs(left.ids)
    before_ids = np.concatenate(([0], np.cumsum(id_costs)))  # cost before each id, and after the last
    begin, end = slot_bounds(left_cost(stream, left), slots, slot)
    last = slot == slots - 1
    keep = (before_ids[:-1] >= begin) & ((before_ids[:-1] < end) | last)
    if slot == 0:
        keep |= before_ids[:-1] < begin  # nothing before the first slot
    ids = left.ids[keep]
    spans: list[Span] = []
    offset = int(before_ids[-1])  # the cost before the first span
    for a, b in left.spans:
        base = stream.cost_before(a)
        weight = stream.cost_before(b) - base
        lo = a if (slot == 0 and begin <= offset) else _cut(stream, a, b, base, begin - offset)
        hi = b if last else _cut(stream, a, b, base, end - offset)
        if hi > lo:
            spans.append((lo, hi))
        offset += weight
    return Plan(ids, tuple(spans))


def _cut(stream: WeighedStream, a: int, b: int, base: int, cost: int) -> int:
    """The first position of span [a, b) whose cost from the span's start begins at or after ``cost``."""
    if cost <= 0:
        return a
    return min(max(stream.position_at(base + cost), a), b)


Original = Callable[[int, int, int, int], Plan]  # (rank, world, worker, workers) -> that worker's plan
