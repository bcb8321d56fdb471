"""Elastic resume: what an epoch has left after a checkpoint, dealt again to any ranks x workers.

A worker's share of an epoch is a ``Plan``: sample ids first (samples that sat in some shuffle buffer when
a checkpoint was taken), then spans of the epoch's virtual stream (``placement``'s shard order laid end to
end; positions past its end wrap, as ``remainder="pad"`` does). An unrestored worker's plan is one span.
From every old worker's plan, how far its reader got and what its buffer held, ``leftover`` gives the rest
of the epoch, and ``deal`` cuts that into equal per-rank quotas for the new world, worker i of every rank
the same length, buffered ids spread evenly so no worker pays all their random reads.

Trade-off: a restore needs every old rank's state (gathered once, e.g. ``all_gather_object``), not only its
own; in exchange the state stays O(ranks x workers + buffered ids) and the stream needs no replay. A span is
cut into pieces only where a new worker's share starts, so pieces stay O(old + new workers) per restore.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

import numpy as np

from ..placement.segments import Segment, rank_quota, stream_ends, stream_to_segments, worker_slice

SampleId = tuple[int, int]  # (shard, sample index in the shard)
Span = tuple[int, int]  # [start, stop) of the epoch's stream


def sample_ids(ids: Any) -> np.ndarray:
    """Sample ids as a read-only (k, 2) int64 array; ValueError unless they are k pairs of ints >= 0.

    An array, not k tuples: 64 x 8 workers' buffers are half a million ids, and Python objects for each
    cost more than the rest of a restore (measured in benchmarks/elastic/elastic_bench.py).
    """
    array = np.array(ids, dtype=np.int64)  # a copy: never a view of the caller's array
    if array.size == 0:
        array = array.reshape(0, 2)
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(f"sample ids must be (shard, index) pairs, not an array of shape {array.shape}")
    if (array < 0).any():
        raise ValueError("a plan holds a negative sample id")
    array.flags.writeable = False
    return array


@dataclass(frozen=True, eq=False)
class Plan:
    """One worker's samples for (the rest of) an epoch: ``ids`` in order, then every position of ``spans``."""

    ids: np.ndarray = field(default_factory=lambda: sample_ids(()))
    spans: tuple[Span, ...] = ()

    def __post_init__(self) -> None:
        if not (isinstance(self.ids, np.ndarray) and not self.ids.flags.writeable):
            object.__setattr__(self, "ids", sample_ids(self.ids))
        object.__setattr__(self, "spans", tuple((int(a), int(b)) for a, b in self.spans))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Plan):
            return NotImplemented
        return self.spans == other.spans and np.array_equal(self.ids, other.ids)

    __hash__ = None  # type: ignore[assignment]

    def __len__(self) -> int:
        return len(self.ids) + sum(stop - start for start, stop in self.spans)

    def after(self, read: int) -> Plan:
        """What is left once the first ``read`` samples were handed to the next stage."""
        if not 0 <= read <= len(self):
            raise ValueError(f"read must be in [0, {len(self)}], not {read}")
        if read <= len(self.ids):
            return Plan(self.ids[read:], self.spans)
        skip = read - len(self.ids)
        spans = []
        for start, stop in self.spans:
            take = min(skip, stop - start)
            skip -= take
            if start + take < stop:
                spans.append((start + take, stop))
        return Plan(self.ids[:0], tuple(spans))

    def to_state(self) -> dict[str, list[list[int]]]:
        return {"ids": self.ids.tolist(), "spans": [list(s) for s in self.spans]}

    @classmethod
    def from_state(cls, state: dict[str, Sequence[Sequence[int]]]) -> Plan:
        spans = tuple((int(start), int(stop)) for start, stop in state["spans"])
        if any(not 0 <= a < b for a, b in spans):
            raise ValueError("a plan holds an empty or reversed span")
        return cls(sample_ids(state["ids"]), spans)


def original_plan(total: int, *, rank: int, world: int, worker: int, workers: int, remainder: str) -> Plan:
    """The plan ``placement.counted_segments`` reads for this place: one span of the epoch's stream."""
    quota = rank_quota(total, world, remainder)
    offset, length = worker_slice(quota, worker, workers)
    start = rank * quota + offset
    return Plan((), ((start, start + length),) if length else ())


@dataclass(frozen=True)
class Progress:
    """One old worker at the checkpoint: its plan, how many of it its reader passed, what its buffer held."""

    plan: Plan
    read: int
    buffered: np.ndarray = field(default_factory=lambda: sample_ids(()))

    def __post_init__(self) -> None:
        if not (isinstance(self.buffered, np.ndarray) and not self.buffered.flags.writeable):
            object.__setattr__(self, "buffered", sample_ids(self.buffered))


def leftover(progress: Iterable[Progress]) -> Plan:
    """Every sample of the epoch no old worker handed out: buffered ones and unread ones, in worker order."""
    ids: list[np.ndarray] = []
    spans: list[Span] = []
    for worker in progress:
        rest = worker.plan.after(worker.read)
        ids += [worker.buffered, rest.ids]
        spans += rest.spans
    return Plan(np.concatenate(ids) if ids else (), join(spans))  # consecutive workers' slices join up


def join(spans: Sequence[Span]) -> tuple[Span, ...]:
    """Spans in the order given, with each that starts where the previous ends merged into it."""
    out: list[Span] = []
    for start, stop in spans:
        if out and out[-1][1] == start:
            out[-1] = (out[-1][0], stop)
        else:
            out.append((start, stop))
    return tuple(out)


def deal(left: Plan, *, rank: int, world: int, worker: int, workers: int, remainder: str) -> Plan:
    """This place's part of ``left`` on the new world: every rank ``rank_quota(len(left))`` samples.

    ``drop`` leaves out the last ``len(left) % world`` samples (spans' tail first); ``pad`` repeats the
    first few again, as an uninterrupted epoch does.
    """
    total = len(left)
    quota = rank_quota(total, world, remainder)
    lengths = [worker_slice(quota, w, workers)[1] for w in range(workers)] * world
    id_counts = _spread(_ids_kept(len(left.ids), total - len(left.ids), world * quota), lengths)
    g = rank * workers + worker
    id_start = sum(id_counts[:g])
    span_start = sum(lengths[:g]) - id_start
    span_stop = span_start + lengths[g] - id_counts[g]
    picked = np.arange(id_start, id_start + id_counts[g]) % max(1, len(left.ids))
    return Plan(left.ids[picked], cut_spans(left.spans, span_start, span_stop))


def _ids_kept(n_ids: int, n_span: int, target: int) -> int:
    """How many ids the new world reads of ``target`` samples in all; span positions make up the rest."""
    dropped = n_ids + n_span - target
    if dropped >= 0:  # drop: the spans' tail goes first, so ids go only when no span is left
        return n_ids - max(0, dropped - n_span)
    # pad: the extra repeat the spans' first positions, or the first ids when no span is left
    return n_ids if n_span else target


def _spread(n: int, lengths: list[int]) -> list[int]:
    """``n`` ids over workers as evenly as their lengths allow (sum(lengths) >= n)."""
    counts = [min(n // len(lengths), length) for length in lengths] if lengths else []
    rest = n - sum(counts)
    while rest:
        for g, length in enumerate(lengths):
            if rest and counts[g] < length:
                counts[g] += 1
                rest -= 1
    return counts


def cut_spans(spans: Sequence[Span], begin: int, end: int) -> tuple[Span, ...]:
    """Positions [begin, end) of the spans laid end to end, wrapping round past their total (pad)."""
    if begin >= end:
        return ()
    ends = list(accumulate(stop - start for start, stop in spans))
    total = ends[-1]
    pieces: list[Span] = []
    while begin < end:
        at = begin % total
        i = bisect.bisect_right(ends, at)
        span_start = ends[i] - (spans[i][1] - spans[i][0])
        take = min(end - begin, ends[i] - at)
        first = spans[i][0] + at - span_start
        pieces.append((first, first + take))
        begin += take
    return tuple(pieces)


class Stream:
    """One epoch's virtual stream: the shard order laid end to end, and where each non-empty shard ends."""

    def __init__(self, counts: np.ndarray, order: np.ndarray) -> None:
        self.counts = np.asarray(counts, dtype=np.int64)
        self.order = order
        self.ends = stream_ends(self.counts, order)
        self.total = int(self.ends[-1]) if len(self.ends) else 0
        # The reader makes one segment per non-empty shard a span touches; empty shards make none.
        empty = len(self.counts) and self.counts.min() == 0
        self._filled_ends = self.ends[self.counts[order] > 0] if empty else self.ends

    def segments(self, plan: Plan) -> list[Segment]:
        """The reader's segments for ``plan``: one per id, then the spans' pieces of shards."""
        segments = [Segment(shard, index, index + 1) for shard, index in plan.ids.tolist()]
        for begin, end in self._laps(plan.spans):
            segments.extend(stream_to_segments(self.order, self.ends, self.counts, begin, end))
        return segments

    def read(self, plan: Plan, segment: int, done: int) -> int:
        """How much of ``plan`` a reader at ``segment`` (with ``done`` of it handed out) has passed.

        O(spans x log shards), without listing the segments: 10^7 shards cost no more than 10.
        """
        if segment < len(plan.ids):
            return segment + done
        k, passed = segment - len(plan.ids), len(plan.ids)
        for begin, end in self._laps(plan.spans):
            first = int(np.searchsorted(self._filled_ends, begin, side="right"))
            pieces = int(np.searchsorted(self._filled_ends, end - 1, side="right")) - first + 1
            if k < pieces:
                start = begin if k == 0 else int(self._filled_ends[first + k - 1])
                return passed + start - begin + done
            k -= pieces
            passed += end - begin
        return passed

    def _laps(self, spans: Sequence[Span]) -> Iterator[Span]:
        """Spans as runs within one lap of the stream: a span past its end goes on from its start (pad)."""
        for start, stop in spans:
            position = start
            while position < stop:
                lap_start = position % self.total
                take = min(stop - position, self.total - lap_start)
                yield lap_start, lap_start + take
                position += take
