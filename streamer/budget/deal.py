"""Equal-cost slices: every rank, and worker i of every rank, gets the same cost of the epoch, to one sample.

The epoch's shard order (the one ``placement/segments.py`` deals samples in) is laid end to end as one
stream of costs. Slot s = rank x workers + worker takes the samples whose cost *starts* in
[s x C / S, (s + 1) x C / S), C the epoch's total cost and S the slots: every sample lands in exactly one
slot, and a slot's cost differs from C / S by less than the largest sample's. Finding a cut reads the cost
column of the one shard it falls in (the per-shard sums place it there), so a worker reads at most two
columns to plan, whatever the dataset's size; memory is O(shards) for the sums, as for the counts.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..placement.segments import Segment, check_place, shard_order, stream_ends

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
    ends = stream_ends(sums, order)
    total = int(ends[-1]) if len(ends) else 0
    slots, slot = world * workers, rank * workers + worker
    locate = _Locator(order, ends, counts, sums, column, weigh)
    begin, end = slot_bounds(total, slots, slot)
    first = locate(begin) if slot else (0, 0)
    last = locate(end) if slot < slots - 1 else (len(order), 0)
    return list(_segments(order, counts, first, last))


class _Locator:
    """The first sample, as (position in the shard order, index in its shard), whose cost starts at or
    after a point of the stream; each shard's column read once, only where a point falls inside it."""

    def __init__(
        self,
        order: np.ndarray,
        ends: np.ndarray,
        counts: np.ndarray,
        sums: np.ndarray,
        column: Column,
        weigh: Weigh | None,
    ) -> None:
        self.order, self.ends, self.counts, self.sums, self.column = order, ends, counts, sums, column
        self.weigh = weigh

    def __call__(self, point: int) -> tuple[int, int]:
        position = int(np.searchsorted(self.ends, point, side="left"))
        while position < len(self.order):
            shard = int(self.order[position])
            start = int(self.ends[position]) - int(self.sums[shard])
            if point <= start:  # the whole shard starts at or after the point
                return position, 0
            starts = self.starts(shard)
            index = int(np.searchsorted(starts, point - start, side="left"))
            if index < len(starts):
                return position, index
            position += 1
        return len(self.order), 0

    def starts(self, shard: int) -> np.ndarray:
        """Where each sample's cost starts within its shard: the exclusive prefix sums of its column."""
        costs = np.asarray(self.column(shard))
        if len(costs) != int(self.counts[shard]):
            raise ValueError(
                f"shard {shard}: its cost column holds {len(costs)} samples, the index {self.counts[shard]}"
            )
        if costs.dtype.kind not in "iu" or (len(costs) and int(costs.min()) < 0):
            raise ValueError(f"shard {shard}: its cost column must hold non-negative integers")
        if self.weigh is not None:
            costs = self.weigh(costs)
        prefix = np.cumsum(costs, dtype=np.int64)
        if len(costs) and int(prefix[-1]) != int(self.sums[shard]):
            raise ValueError(
                f"shard {shard}: its costs add up to {int(prefix[-1])}, the index says {self.sums[shard]}"
                " (a stale column: write it again with the index)"
            )
        return prefix - costs


def _segments(
    order: np.ndarray, counts: np.ndarray, first: tuple[int, int], last: tuple[int, int]
) -> list[Segment]:
    """The samples from ``first`` up to, not including, ``last``, as one segment per shard touched."""
    (position, index), (stop_position, stop_index) = first, last
    segments: list[Segment] = []
    while (position, index) < (stop_position, stop_index) and position < len(order):
        shard = int(order[position])
        stop = stop_index if position == stop_position else int(counts[shard])
        if stop > index:
            segments.append(Segment(shard, index, stop))
        position, index = position + 1, 0
    return segments
