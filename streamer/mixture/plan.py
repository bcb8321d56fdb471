"""Mixture planning: how many samples of each source a worker reads, and in which order — pure functions.

A worker's length is its share of the rank's quota (as for one dataset); its per-source budgets are the
largest-remainder apportionment of that length, the same for worker i on every rank. The order is
earliest-deadline-first over those budgets, which keeps every source's count within 1 of its share at
every prefix of the stream. Trade-off: budgets are rounded per epoch, so a source whose share of a worker
is under half a sample may get none that epoch; in exchange a worker's position is just its per-source
counts, every source's epoch is one contiguous run of its pass stream, and a restore is exact.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction

from ..placement.segments import check_place, rank_quota, worker_slice

try:  # the interleave's loop in C (_interleave.c); without a compiler, the same loop in Python
    from ._interleave import fill as _native_fill
except ImportError:  # pragma: no cover - the build without a C compiler
    _native_fill = None

KINDS = ("weight", "repeat", "samples")


@dataclass(frozen=True)
class Share:
    """What one source asks of an epoch: a ``weight`` (its share), ``repeat`` passes, or ``samples``."""

    name: str
    size: int  # samples in one pass of the source
    kind: str = "weight"
    value: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(
                f"source {self.name!r}: the share must be one of {', '.join(KINDS)}, not {self.kind!r}"
            )
        if self.size < 1:
            raise ValueError(f"source {self.name!r} has no samples; a mixture source needs at least one")
        if isinstance(self.value, bool) or not self.value > 0:
            raise ValueError(
                f"source {self.name!r}: {self.kind} must be > 0, not {self.value!r}; to leave the "
                "source out of this run, give it weight: 0"
            )
        if self.kind == "samples" and int(self.value) != self.value:
            raise ValueError(f"source {self.name!r}: samples must be a whole number, not {self.value!r}")


def epoch_targets(shares: Sequence[Share], epoch_size: int | None = None) -> tuple[list[Fraction], int]:
    """Each source's samples per epoch (exact fractions) and the epoch size they add up to.

    ``repeat`` and ``samples`` sources take what they ask; ``weight`` sources share the rest of the epoch in
    proportion to their weights. The epoch size defaults to those fixed amounts plus one pass of every
    weighted source.
    """
    if not shares:
        raise ValueError("a mixture needs at least one source")
    fixed = [_fixed(s) for s in shares]
    weighted = [Fraction(s.value) if s.kind == "weight" else Fraction(0) for s in shares]
    taken = sum(f for f in fixed if f is not None)
    if epoch_size is None:
        epoch_size = max(1, round(taken + sum(s.size for s in shares if s.kind == "weight")))
    elif isinstance(epoch_size, bool) or not isinstance(epoch_size, int) or epoch_size < 1:
        raise ValueError(f"epoch_size must be a positive integer, not {epoch_size!r}")
    if not any(weighted):  # fixed amounts only: they are the epoch, rounded to whole samples
        if epoch_size != max(1, round(taken)):
            raise ValueError(
                f"epoch_size={epoch_size}, but the repeat/samples sources take "
                f"{float(taken):g}; give exactly {max(1, round(taken))}, or leave epoch_size "
                "out"
            )
        return [f for f in fixed if f is not None], epoch_size
    left = epoch_size - taken
    if left <= 0:
        raise ValueError(
            f"epoch_size={epoch_size}, but the repeat/samples sources take {float(taken):g} and "
            f"the weighted ones need a share; give more than {float(taken):g}, or leave "
            "epoch_size out"
        )
    total_weight = sum(weighted)
    targets = [f if f is not None else left * w / total_weight for f, w in zip(fixed, weighted, strict=True)]  # type: ignore[misc]
    return targets, epoch_size


def _fixed(share: Share) -> Fraction | None:
    if share.kind == "repeat":
        return Fraction(share.value) * share.size
    if share.kind == "samples":
        return Fraction(int(share.value))
    return None


def apportion(targets: Sequence[Fraction], total: int) -> list[int]:
    """Integers summing to ``total`` in proportion to ``targets``: each the floor or ceiling of its quota."""
    whole = sum(targets)
    if total == 0 or whole == 0:
        return [0] * len(targets)
    quotas = [t * total / whole for t in targets]
    counts = [q.numerator // q.denominator for q in quotas]
    left = total - sum(counts)
    # Largest fractional part first; ties to the earlier source, so the answer never depends on the platform.
    by_remainder = sorted(range(len(quotas)), key=lambda j: (counts[j] - quotas[j], j))
    for j in by_remainder[:left]:
        counts[j] += 1
    return counts


@dataclass(frozen=True)
class MixturePlan:
    """One epoch of a mixture on ``world`` ranks x ``workers`` workers: lengths and per-source budgets."""

    names: tuple[str, ...]
    epoch_size: int
    world: int
    workers: int
    rank_length: int  # samples per rank per epoch, the same on every rank
    budgets_by_length: dict[int, tuple[int, ...]]  # worker length -> per-source budget

    def worker_length(self, worker: int) -> int:
        return worker_slice(self.rank_length, worker, self.workers)[1]

    def budgets(self, worker: int) -> tuple[int, ...]:
        return self.budgets_by_length[self.worker_length(worker)]

    def _kinds(self) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
        """(long workers, a long worker's budgets, a short one's): worker lengths differ by 1 at most."""
        short, extra = divmod(self.rank_length, self.workers)
        none = (0,) * len(self.names)
        return extra, self.budgets_by_length.get(short + 1, none), self.budgets_by_length.get(short, none)

    def per_rank(self) -> list[int]:
        """Samples of each source one rank reads per epoch (the same on every rank)."""
        extra, long, short = self._kinds()
        return [extra * a + (self.workers - extra) * b for a, b in zip(long, short, strict=True)]

    def per_epoch(self) -> list[int]:
        """Samples of each source read per epoch by all ranks together: how far its pass stream moves."""
        return [self.world * n for n in self.per_rank()]

    def worker_range(self, j: int, rank: int, worker: int) -> tuple[int, int]:
        """[begin, end) of source j's epoch run (0 = the epoch's first sample of it) this worker reads."""
        extra, long, short = self._kinds()
        longs = min(worker, extra)
        per_rank = extra * long[j] + (self.workers - extra) * short[j]
        begin = rank * per_rank + longs * long[j] + (worker - longs) * short[j]
        return begin, begin + self.budgets(worker)[j]


def plan_mixture(
    shares: Sequence[Share],
    *,
    world: int,
    workers: int,
    epoch_size: int | None = None,
    remainder: str = "drop",
) -> MixturePlan:
    """The plan of one epoch: O(number of sources) work and memory, whatever the epoch size."""
    check_place(0, world, 0, workers)
    names = tuple(s.name for s in shares)
    if len(set(names)) != len(names):
        duplicate = next(n for n in names if names.count(n) > 1)
        raise ValueError(f"source name {duplicate!r} is used twice; names must be unique")
    targets, size = epoch_targets(shares, epoch_size)
    rank_length = rank_quota(size, world, remainder)
    if rank_length < workers:
        raise ValueError(
            f"an epoch of {size} samples gives {rank_length} per rank, fewer than the "
            f"{workers} workers of each of {world} ranks; raise epoch_size"
        )
    lengths = {worker_slice(rank_length, w, workers)[1] for w in range(workers)}
    budgets = {n: tuple(apportion(targets, n)) for n in lengths}
    return MixturePlan(names, size, world, workers, rank_length, budgets)


class Interleave:
    """Earliest-deadline-first order of per-source budgets over ``length`` positions.

    Source j's i-th sample may come no earlier than the first position where ceil(i-th share) allows it,
    and no later than the one where floor(share) demands it; picking the earliest deadline among the
    samples allowed meets every deadline, so at each prefix n, |count_j - budget_j * n / length| < 1.
    The state is the counts alone: the same counts give the same heaps, hence the same continuation.
    Iterating yields source indices from where the counts stand, updating ``counts`` as it goes.
    """

    def __init__(
        self, budgets: Sequence[int], counts: Sequence[int] | None = None, *, native: bool = True
    ) -> None:
        self.budgets = tuple(budgets)
        self.length = sum(self.budgets)
        self.counts = array("q", counts if counts is not None else [0] * len(self.budgets))
        self._native = _native_fill if native else None
        if len(self.counts) != len(self.budgets) or any(
            not 0 <= c <= b for c, b in zip(self.counts, self.budgets, strict=True)
        ):
            raise ValueError(f"counts {list(self.counts)} do not fit budgets {list(self.budgets)}")
        self.position = sum(self.counts)
        self._budget_array = array("q", self.budgets)
        self._state: tuple[list[tuple[int, int, int]], list[tuple[int, int]]] | None = None

    def state(self) -> dict[str, list[int]]:
        return {"counts": list(self.counts)}

    def window(self, j: int, count: int) -> tuple[int, int]:
        """(release, deadline) of source j's sample ``count + 1``: the first position its share allows it
        at and the last it may come at (positions from 1). Constant shares here; ``ScheduledOrder``'s
        follow a schedule, with the same heaps and loop."""
        budget, length = self.budgets[j], self.length
        return count * length // budget + 1, -(-(count + 1) * length // budget)

    def _heaps(self) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]]]:
        """(waiting: (release, deadline, source) not yet allowed, ready: (deadline, source)), from counts."""
        waiting, ready = [], []
        for j, (count, budget) in enumerate(zip(self.counts, self.budgets, strict=True)):
            if count < budget:
                release, deadline = self.window(j, count)
                if release <= self.position + 1:
                    ready.append((deadline, j))
                else:
                    waiting.append((release, deadline, j))
        heapq.heapify(ready)
        heapq.heapify(waiting)
        return waiting, ready

    def fill(self, n: int) -> list[int]:
        """The next ``n`` sources (fewer at the end); ``counts`` and ``position`` move past them."""
        if self._native is not None:  # the same loop in C (_interleave.c), when it is built
            out: list[int] = self._native(self._budget_array, self.counts, self.position, n)
            self.position += len(out)
            return out
        if self._state is None:
            self._state = self._heaps()
        waiting, ready = self._state
        counts, budgets, window = self.counts, self.budgets, self.window
        push, pop, replace = heapq.heappush, heapq.heappop, heapq.heapreplace
        position, stop = self.position, min(self.length, self.position + n)
        out = []
        while position < stop:  # per sample (without the C loop): one heap operation or two
            position += 1
            while waiting and waiting[0][0] <= position:
                _, deadline, j = pop(waiting)
                push(ready, (deadline, j))
            j = ready[0][1]
            count = counts[j] = counts[j] + 1
            if count < budgets[j]:
                release, deadline = window(j, count)
                if release <= position + 1:
                    replace(ready, (deadline, j))
                else:
                    pop(ready)
                    push(waiting, (release, deadline, j))
            else:
                pop(ready)
            out.append(j)
        self.position = position
        return out

    def __iter__(self) -> Iterator[int]:
        """One source at a time, ``counts`` exact at every step (``fill`` is the fast way)."""
        while chunk := self.fill(1):
            yield chunk[0]
