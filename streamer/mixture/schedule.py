"""Mixture schedules: a source's weight as a function of the global step, and the running share it gives.

A ``Schedule`` is points (step, weight): ``"stages"`` holds each weight from its step until the next
point (piecewise constant); ``"ramp"`` moves along the line between points, each step taking the line's
value at that step. The first weight holds before the first point, the last after the last. A step is a
batch as the DataLoader hands it out (``chain/skips.py``'s ``step_of``), counted from the first epoch.

A worker's running share of source j after p samples, ``Q_j(p)``, is the sum over its first p positions
of j's weight over all weights at that position's step (exact fractions): piecewise linear in p, one
piece per run of batches whose weights do not change (``pieces``). Its epoch budget is ``Q_j(L)``
rounded by largest remainder; ``ScheduledOrder`` then picks the sources earliest deadline first, the
i-th sample of j allowed once ``Q_j > i - 1`` and due when ``Q_j >= i``. In any interval the samples
due inside it number at most what ``Q`` grows there, i.e. the positions it holds, so every deadline is
met and every prefix of every worker is within one sample of its running share, as for constant
weights (a ramp's shares are on a grid of 2**-40: see ``shares_at``). Trade-off: a ramp is a piece per
batch of the worker (planning is O(batches it spans): 0.2 s for 3,000), and the order runs in Python,
in integers: 1.2 us a sample with stages, 1.7 with a ramp, against 0.013 for constant weights' C loop.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .plan import Interleave

KINDS = ("stages", "ramp")
GRID = 1 << 40  # a ramp's shares are multiples of 1 / GRID (see shares_at)


def as_fraction(value: Any, what: str) -> Fraction:
    """A weight as an exact fraction (a float as written: 0.1 is 1/10); ValueError naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
        raise ValueError(f"{what} must be a number, not {value!r}")
    weight = Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
    if not weight >= 0 or weight != weight:
        raise ValueError(f"{what} must be >= 0, not {value!r}")
    return weight


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """A weight over global steps: ``points`` ((step, weight), steps increasing from any step >= 0),
    ``kind`` ``"stages"`` or ``"ramp"`` (see the module)."""

    points: tuple[tuple[int, Fraction], ...]
    kind: str = "stages"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"a weight schedule is one of {', '.join(KINDS)}, not {self.kind!r}")
        if not self.points:
            raise ValueError("a weight schedule needs at least one (step, weight) point")
        steps = [step for step, _ in self.points]
        if any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in steps):
            raise ValueError(f"a weight schedule's steps must be ints >= 0, not {steps!r:.80}")
        if any(b <= a for a, b in itertools.pairwise(steps)):
            raise ValueError(f"a weight schedule's steps must increase, not {steps!r:.80}")

    @classmethod
    def of(cls, value: Any, what: str = "weight") -> Schedule:
        """From ``{"stages": [[step, weight], ...]}`` or ``{"ramp": [...]}`` (YAML's form), a Schedule, or a
        number (constant); ValueError naming ``what``."""
        if isinstance(value, Schedule):
            return value
        if not isinstance(value, Mapping):
            return cls(points=((0, as_fraction(value, what)),))
        if len(value) != 1 or next(iter(value)) not in KINDS:
            raise ValueError(
                f"{what} as a schedule is {{'stages': [[step, weight], ...]}} or {{'ramp': [...]}}, "
                f"not {dict(value)!r:.80}"
            )
        kind, points = next(iter(value.items()))
        try:
            pairs = [(step, as_fraction(weight, f"{what} at step {step!r}")) for step, weight in points]
        except (TypeError, ValueError) as exc:
            if isinstance(exc, ValueError) and "must be" in str(exc):
                raise
            raise ValueError(f"{what}: {kind} must be [step, weight] pairs, not {points!r:.80}") from None
        return cls(points=tuple(pairs), kind=kind)

    @property
    def constant(self) -> bool:
        return len({weight for _, weight in self.points}) == 1

    def at(self, step: int) -> Fraction:
        """The weight at global step ``step``."""
        points = self.points
        at = bisect.bisect_right(points, step, key=lambda point: point[0]) - 1
        if at < 0:
            return points[0][1]
        if self.kind == "stages" or at == len(points) - 1:
            return points[at][1]
        (s0, w0), (s1, w1) = points[at], points[at + 1]
        return w0 + (w1 - w0) * (step - s0) / (s1 - s0)

    def changes(self, begin: int, end: int) -> list[int]:
        """The steps in (begin, end) where the weight may differ from the step before."""
        if self.kind == "stages":
            return [step for step, _ in self.points if begin < step < end]
        first, last = self.points[0][0], self.points[-1][0]
        return list(range(max(begin + 1, first + 1), min(end, last + 1)))

    def to_state(self) -> dict[str, list[list[Any]]]:
        """As plain data (weights as "num/den" strings: exact), for a plan's identity."""
        return {self.kind: [[step, str(weight)] for step, weight in self.points]}


@dataclass(frozen=True)
class Pieces:
    """A worker's running shares: ``starts`` (each piece's first position, from 0), ``length``, and per
    source ``at[j][k]``, ``Q_j`` at piece k's start, and ``rate[j][k]``, its share inside piece k."""

    starts: tuple[int, ...]
    length: int
    at: tuple[tuple[Fraction, ...], ...]
    rate: tuple[tuple[Fraction, ...], ...]

    def total(self, j: int) -> Fraction:
        """``Q_j(length)``: source j's share of the whole worker epoch."""
        return self.at[j][-1] + (self.length - self.starts[-1]) * self.rate[j][-1]

    def budgets(self) -> list[int]:
        """Each source's samples this worker epoch: ``Q_j(length)`` rounded by largest remainder."""
        totals = [self.total(j) for j in range(len(self.at))]
        counts = [int(t) for t in totals]  # >= 0: the floor
        by_remainder = sorted(range(len(totals)), key=lambda j: (counts[j] - totals[j], j))
        for j in by_remainder[: self.length - sum(counts)]:
            counts[j] += 1
        return counts


def shares_at(schedules: Sequence[Schedule], step: int) -> tuple[Fraction, ...]:
    """Every source's share at ``step``: its weight over all of them (with a ramp, to the nearest
    2**-40); ValueError when all are 0."""
    weights = [schedule.at(step) for schedule in schedules]
    whole = sum(weights)
    if whole == 0:
        raise ValueError(f"at step {step} every source's weight is 0: a step must read something")
    shares = [weight / whole for weight in weights]
    if all(schedule.kind == "stages" for schedule in schedules):
        return tuple(shares)
    # A ramp's shares differ at every step: exact, the running share's denominators would grow with
    # every step (10,000 bits after 3,000). On a grid of 2**-40 (largest remainder: still summing to
    # 1) they stay small, and the running share drifts from the exact one by under 0.001 in 10**9.
    quotas = [share * GRID for share in shares]
    parts = [int(q) for q in quotas]
    by_remainder = sorted(range(len(quotas)), key=lambda j: (parts[j] - quotas[j], j))
    for j in by_remainder[: GRID - sum(parts)]:
        parts[j] += 1
    return tuple(Fraction(part, GRID) for part in parts)


def pieces(
    schedules: Sequence[Schedule], *, length: int, per_batch: int, first_step: int, steps: Sequence[int]
) -> Pieces:
    """The running shares of a worker reading ``length`` samples in batches of ``per_batch``, its local
    batch t being global step ``first_step + steps[t]`` (``steps`` increasing: ``step_of`` for each)."""
    if length < 1 or not steps:
        raise ValueError(f"a worker epoch needs samples and batches, not length={length}, {len(steps)} steps")
    begin, end = first_step + steps[0], first_step + steps[-1] + 1
    changes = sorted({c for s in schedules for c in s.changes(begin, end)})
    starts = [0]
    steps_of = [begin]
    for change in changes:  # the worker's first batch at or after each change starts a piece
        t = bisect.bisect_left(steps, change - first_step)
        if t < len(steps) and t * per_batch > starts[-1]:
            starts.append(t * per_batch)
            steps_of.append(first_step + steps[t])
        elif t < len(steps):  # the same batch as the piece before: it starts at that step's weights
            steps_of[-1] = first_step + steps[t]
    rates = [shares_at(schedules, step) for step in steps_of]
    count = len(schedules)
    at: list[list[Fraction]] = [[Fraction(0)] for _ in range(count)]
    for k in range(1, len(starts)):
        width = starts[k] - starts[k - 1]
        for j in range(count):
            at[j].append(at[j][-1] + width * rates[k - 1][j])
    return Pieces(
        tuple(starts),
        length,
        tuple(tuple(a) for a in at),
        tuple(tuple(r[j] for r in rates) for j in range(count)),
    )


class ScheduledOrder(Interleave):
    """Earliest-deadline-first picks over ``Pieces`` (see the module): ``Interleave``'s heaps, loop and
    state (the counts), with each sample's window from the schedule's running share."""

    def __init__(self, shares: Pieces, budgets: Sequence[int], counts: Sequence[int] | None = None) -> None:
        super().__init__(budgets, counts, native=False)  # the C loop knows constant shares only
        if self.length != shares.length:
            raise ValueError(f"budgets add up to {self.length}, not the worker's {shares.length} samples")
        self.shares = shares
        starts = shares.starts
        self._ends = [*starts[1:], shares.length]
        self._ints = [_integers(at, rate) for at, rate in zip(shares.at, shares.rate, strict=True)]
        self._strict = [0] * len(self.budgets)  # each source's piece pointer for "> x" and ">= x"
        self._reach = [0] * len(self.budgets)

    def first(self, j: int, x: int, strict: bool) -> int:
        """The first position p (1 = after one sample) where ``Q_j(p) > x`` (``strict``) or ``>= x``; past
        the end when it never is. In integers: ``Q_j`` at piece k's start is ``num[k] / den[k]``, its rate
        ``up[k] / over[k]``; a pointer per source and kind finds the piece (``x`` only grows for a source,
        so it only moves on: amortised O(1) a sample)."""
        num, den, up, over, scale = self._ints[j]
        pointers = self._strict if strict else self._reach
        k, last = pointers[j], len(num) - 1
        # The last piece starting at or below x (strict) or below x: Q_j does not decrease.
        while k < last and (num[k + 1] <= x * den[k + 1] if strict else num[k + 1] < x * den[k + 1]):
            k += 1
        pointers[j] = k
        if up[k] == 0:  # flat to the end (a flat piece before another is passed over above)
            return self.shares.length + 1
        gap = (x * den[k] - num[k]) * over[k]
        p = self.shares.starts[k] + (gap // scale[k] + 1 if strict else -(-gap // scale[k]))
        return p if p <= self._ends[k] else self.shares.length + 1

    def window(self, j: int, count: int) -> tuple[int, int]:
        """(release, deadline) of source j's sample ``count + 1``, from the running share."""
        release = max(self.first(j, count, True), 1)
        deadline = min(self.first(j, count + 1, False), self.length)
        return release, max(deadline, release)


def _integers(at: Sequence[Fraction], rate: Sequence[Fraction]) -> tuple[list[int], ...]:
    """One source's pieces in integers: Q at each start (num, den), the rate (up, over), den x up."""
    num = [q.numerator for q in at]
    den = [q.denominator for q in at]
    up = [r.numerator for r in rate]
    over = [r.denominator for r in rate]
    return num, den, up, over, [d * u for d, u in zip(den, up, strict=True)]
