"""Elastic resume of budgeted batches: what an epoch has left, dealt again by cost to any ranks x workers.

The epoch's stream (``elastic/deal.py``'s positions, the shard order laid end to end) is weighed by cost
as the overlong rule keeps it (``WeighedStream``): a position's cost before it comes from the per-shard
weighed sums and the column of the one shard it falls in. A budgeted worker's slice is one span of that
stream (``slot_span``: the same samples ``deal.cost_segments`` gives it), so the elastic machinery finds
what each old worker left (its unread span, the ids its shuffle buffer and its batcher's window held) as
for samples; ``deal_by_cost`` then cuts that leftover into equal-cost parts for the new world, ids first
(they are few: buffers and windows), and every new worker yields the same number of batches again, a
target computed from the cost left. Memory: O(shards) for the sums, a few shards' columns at a time.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from ..elastic.deal import Plan, Span
from ..placement.segments import stream_ends
from .deal import Column, Weigh, slot_bounds

CACHED = 8


class WeighedStream:
    """The epoch's stream of positions, each weighing what ``weigh`` makes of its sample's cost.

    ``counts``: samples per shard; ``sums``: each shard's weighed cost; ``order``: the epoch's shard
    order; ``column``: a shard's costs; ``weigh``: what those costs weigh."""

    def __init__(
        self, counts: np.ndarray, sums: np.ndarray, order: np.ndarray, column: Column, weigh: Weigh
    ) -> None:
        self.counts = np.asarray(counts, dtype=np.int64)
        self.sums = np.asarray(sums, dtype=np.int64)
        self.order, self.column, self.weigh = order, column, weigh
        self.count_ends = stream_ends(self.counts, order)
        self.cost_ends = stream_ends(self.sums, order)
        self.total = int(self.count_ends[-1]) if len(order) else 0
        self.total_cost = int(self.cost_ends[-1]) if len(order) else 0
        self._prefixes: OrderedDict[int, np.ndarray] = OrderedDict()

    def prefix(self, shard: int) -> np.ndarray:
        """A shard's weighed costs summed from its start, one more entry than samples (0 first)."""
        cached = self._prefixes.get(shard)
        if cached is None:
            weighed = self.weigh(np.asarray(self.column(shard), dtype=np.int64))
            if len(weighed) != int(self.counts[shard]) or int(weighed.sum()) != int(self.sums[shard]):
                raise ValueError(f"shard {shard}: its cost column disagrees with the index (stale)")
            cached = self._prefixes[shard] = np.concatenate(([0], np.cumsum(weighed, dtype=np.int64)))
            if len(self._prefixes) > CACHED:
                self._prefixes.popitem(last=False)
        return cached

    def _shard_at(self, position: int) -> tuple[int, int, int]:
        """(place in the order, first position, first cost) of the shard holding ``position``."""
        at = int(np.searchsorted(self.count_ends, position, side="right"))
        shard = int(self.order[at])
        return (
            at,
            int(self.count_ends[at]) - int(self.counts[shard]),
            int(self.cost_ends[at]) - int(self.sums[shard]),
        )

    def cost_before(self, position: int) -> int:
        """The weighed cost of positions [0, position)."""
        if position >= self.total:
            return self.total_cost
        at, first, cost = self._shard_at(position)
        return cost + int(self.prefix(int(self.order[at]))[position - first])

    def position_at(self, cost: int) -> int:
        """The first position whose cost starts at or after ``cost`` (the stream's end if none)."""
        at = int(np.searchsorted(self.cost_ends, cost, side="left"))
        while at < len(self.order):
            shard = int(self.order[at])
            first = int(self.count_ends[at]) - int(self.counts[shard])
            start = int(self.cost_ends[at]) - int(self.sums[shard])
            if self.counts[shard] and cost <= start:
                return first
            if self.counts[shard]:
                starts = self.prefix(shard)[:-1]
                index = int(np.searchsorted(starts, cost - start, side="left"))
                if index < len(starts):
                    return first + index
            at += 1
        return self.total

    def id_costs(self, ids: np.ndarray) -> np.ndarray:
        """The weighed cost of each (shard, index) id."""
        return np.array([int(np.diff(self.prefix(s)[i : i + 2])[0]) for s, i in ids.tolist()], dtype=np.int64)


def slot_span(stream: WeighedStream, *, rank: int, world: int, worker: int, workers: int) -> Plan:
    """A budgeted worker's slice as one span of the stream: what ``cost_segments`` reads, as positions."""
    slots, slot = world * workers, rank * workers + worker
    begin, end = slot_bounds(stream.total_cost, slots, slot)
    first = stream.position_at(begin) if slot else 0
    last = stream.position_at(end) if slot < slots - 1 else stream.total
    return Plan((), ((first, last),) if last > first else ())


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
