"""Equal-cost slices: every rank, and worker i of every rank, gets the same cost of the epoch, to one sample.

The epoch's shard order (the one ``placement/segments.py`` deals samples in) is laid end to end as one
stream of costs. Slot s = rank x workers + worker takes the samples whose cost *starts* in
[s x C / S, (s + 1) x C / S), C the epoch's total cost and S the slots: every sample lands in exactly one
slot, and a slot's cost differs from C / S by less than the largest sample's. Finding a cut reads the cost
column of the one shard it falls in (the per-shard sums place it there), so a worker reads at most two
columns to plan, whatever the dataset's size; memory is O(shards) for the sums, as for the counts.
``WeighedStream`` is that stream, position <-> cost; a slot is one span of it (``slot_span``), which an
elastic restore (``elastic.py``) also reads as what each old worker was dealt.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from ..elastic.deal import Plan, Stream
from ..placement.segments import Segment, check_place, shard_order, stream_ends

CACHED = 8  # shards whose weighed prefix a stream keeps: the few its cuts and ids fall in

Column = Callable[[int], np.ndarray]  # shard number -> its samples' costs, in shard order
Weigh = Callable[[np.ndarray], np.ndarray]  # a shard's costs -> what each weighs in the deal


def slot_bounds(total: int, slots: int, slot: int) -> tuple[int, int]:
    """The cost interval [begin, end) whose samples slot ``slot`` of ``slots`` takes."""
    return slot * total // slots, (slot + 1) * total // slots


def cost_segments(
    counts: np.ndarray,
    sums: np.ndarray,
    column: Column,
    *,
    rank: int,
    world: int,
    worker: int,
    workers: int,
    seed: int,
    epoch: int,
    shuffle: bool = True,
    weigh: Weigh | None = None,
) -> list[Segment]:
    """The segments one worker reads in one epoch when batches are planned by cost.

    ``counts`` and ``sums``: each shard's samples and their total weight; ``column``: a shard's per-sample
    costs, asked for only for the shards a cut falls inside; ``weigh``: what those costs weigh (None:
    themselves; a budget weighs what its overlong rule keeps), summing to ``sums`` (else ValueError: the
    columns are stale). The last slot also takes samples of zero weight after the stream's last."""
    check_place(rank, world, worker, workers)
    counts = np.asarray(counts, dtype=np.int64)
    sums = np.asarray(sums, dtype=np.int64)
    if counts.shape != sums.shape:
        raise ValueError(f"counts has {len(counts)} shards but sums has {len(sums)}")
    if (sums < 0).any() or (counts < 0).any():
        raise ValueError("counts and cost sums must be non-negative")
    order = shard_order(len(counts), seed, epoch, shuffle)
    stream = WeighedStream(counts, sums, order, column, weigh or _itself)
    place = {"rank": rank, "world": world, "worker": worker, "workers": workers}
    return Stream(counts, order).segments(slot_span(stream, **place))


def _itself(costs: np.ndarray) -> np.ndarray:
    return costs


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
            costs = np.asarray(self.column(shard))
            if len(costs) != int(self.counts[shard]):
                held, indexed = len(costs), int(self.counts[shard])
                raise ValueError(f"shard {shard}: its cost column holds {held} samples, the index {indexed}")
            if costs.dtype.kind not in "iu" or (len(costs) and int(costs.min()) < 0):
                raise ValueError(f"shard {shard}: its cost column must hold non-negative integers")
            prefix = np.cumsum(self.weigh(costs.astype(np.int64)), dtype=np.int64)
            if len(costs) and int(prefix[-1]) != int(self.sums[shard]):
                raise ValueError(
                    f"shard {shard}: its costs add up to {int(prefix[-1])}, the index says {self.sums[shard]}"
                    " (a stale column: write it again with the index)"
                )
            cached = self._prefixes[shard] = np.concatenate(([0], prefix))
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
