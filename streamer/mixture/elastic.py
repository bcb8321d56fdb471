"""Elastic resume of a Mixture: each source's unread part of an epoch, dealt again to any ranks x workers.

A source's leftover is spans of its pass stream (``passes.py``): every old worker's unread run, plus the
unread rest of the window it stood in (single positions, sorted; windows hand samples out in a keyed
order, so which ones are out is a pure function of the count). Dealt to the new world, every rank gets the
same number of samples in all, each source split over ranks within one of its even share; worker i of
every rank the same length, its per-source budgets in proportion to what its rank has of each. A new
worker reads a source's spans as one virtual run (``PlanStream``), in windows as before. Trade-off: as for
one dataset, every old rank's state is needed (gathered once); the buffers' samples are not spread over
the new workers but read where their spans fall, a few random reads each.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from fractions import Fraction

import numpy as np

from ..elastic.deal import Plan, Span, cut_spans
from ..placement.segments import Segment, rank_quota, worker_slice
from .passes import PassStream
from .plan import apportion


class PlanStream:
    """A pass stream's spans read as one run [0, n): what ``SourceWindows`` reads after a restore."""

    def __init__(self, stream: PassStream, spans: Sequence[Span]) -> None:
        self.stream, self.spans = stream, tuple(spans)
        self.size = sum(stop - start for start, stop in self.spans)

    def positions(self, begin: int, end: int) -> tuple[Span, ...]:
        """The pass-stream spans of run positions [begin, end)."""
        return cut_spans(self.spans, begin, min(end, self.size))

    def segments(self, begin: int, end: int) -> Iterator[Segment]:
        for start, stop in self.positions(begin, end):
            yield from self.stream.segments(start, stop)

    def window(self, begin: int, end: int, window: int, offset: int) -> tuple[int, int]:
        """[lo, hi): the window holding run position ``begin + offset``; windows cut only at the run's end."""
        lo = begin + offset // window * window
        return lo, min(lo + window, end)

    def window_order(self, lo: int, hi: int) -> list[int]:
        return self.stream.window_order(lo, hi)

    def at(self, position: int) -> tuple[int, int]:
        """(shard, index) of the sample at run position ``position``."""
        (start, _), *_ = self.positions(position, position + 1)
        return self.stream.at(start)


def unread(stream: PassStream | PlanStream, run: tuple[int, int], window: int, count: int) -> list[Span]:
    """The spans of ``run`` (in ``stream``'s positions) not handed out after its first ``count`` samples."""
    begin, end = run
    if count >= end - begin:
        return []
    lo, hi = stream.window(begin, end, max(1, window), count)
    rest = np.sort(np.asarray(stream.window_order(lo, hi)[begin + count - lo :], dtype=np.int64)) + lo
    cuts = np.flatnonzero(np.diff(rest) != 1) + 1  # where a run of consecutive positions ends
    firsts, lasts = rest[np.r_[0, cuts]], rest[np.r_[cuts - 1, len(rest) - 1]]
    spans: list[Span] = list(zip(firsts.tolist(), (lasts + 1).tolist(), strict=True))
    if hi < end:
        spans.append((hi, end))
    if isinstance(stream, PlanStream):
        return [piece for start, stop in spans for piece in stream.positions(start, stop)]
    return spans


def rank_shares(lefts: Sequence[int], world: int, remainder: str) -> list[list[int]]:
    """``shares[r][j]``: samples of source j for rank r; every rank ``rank_quota(sum(lefts))`` in all.

    Each source gives every rank its floor share; the extras go round the ranks in turn, source after
    source, so rank totals differ by one at most, and ``drop`` takes back the last ones dealt (at most
    world - 1) while ``pad`` deals further ones, again source after source, repeating samples.
    """
    total = sum(lefts)
    quota = rank_quota(total, world, remainder)
    shares = [[n // world for n in lefts] for _ in range(world)]
    extras = [j for j, n in enumerate(lefts) for _ in range(n % world)]
    if quota * world < total:  # drop
        extras = extras[: len(extras) - (total - quota * world)]
    elif quota * world > total:  # pad: more of the sources that have any, in turn
        present = [j for j, n in enumerate(lefts) if n] or [0]
        extras += [present[i % len(present)] for i in range(quota * world - total)]
    for i, j in enumerate(extras):
        shares[i % world][j] += 1
    return shares


def worker_budgets(share: Sequence[int], workers: int) -> list[list[int]]:
    """Per-source budgets of each worker of a rank holding ``share``: worker lengths as ``worker_slice``."""
    quota = sum(share)
    left = list(share)
    budgets = []
    for w in range(workers):
        length = worker_slice(quota, w, workers)[1]
        # In proportion to what is still undealt: each floor or ceiling of it, so none exceeds what is left.
        got = apportion([Fraction(n) for n in left], length)
        left = [a - b for a, b in zip(left, got, strict=True)]
        budgets.append(got)
    return budgets


def deal_sources(
    lefts: Sequence[Plan], *, rank: int, world: int, worker: int, workers: int, remainder: str
) -> tuple[list[int], list[Plan]]:
    """This place's budget and spans of each source's leftover: O(world x workers x sources)."""
    shares = rank_shares([len(left) for left in lefts], world, remainder)
    before = [0] * len(lefts)  # samples of each source dealt to the places before this one
    mine: list[int] = []
    for r in range(rank + 1):
        budgets = worker_budgets(shares[r], workers)
        for w in range(workers):
            if (r, w) == (rank, worker):
                mine = budgets[w]
                break
            before = [a + b for a, b in zip(before, budgets[w], strict=True)]
    plans = [
        Plan((), cut_spans(left.spans, start, start + n)) if n else Plan()
        for left, start, n in zip(lefts, before, mine, strict=True)
    ]
    return mine, plans
