"""One worker's samples packed into exactly ``target`` batches within a budget, through a bounded window.

Samples arrive as (cost, id) in stream order (after the shuffle buffer). A pool holds up to ``window`` of
them; each batch takes the pool's largest first, adding what still fits, and stops once it holds its share
of what is left (remaining cost / batches left), so a worker that packs better than planned spreads its
samples over the batches it owes instead of running out of them. ``"pack"``: the batch's costs sum to at
most the budget (what varlen attention packs); ``"pad"``: count x largest cost at most the budget (what
padding to the longest costs), and taking the pool's largest first groups like lengths.

Exactly ``target`` batches come out, always: once they are out, what is left is counted in
``left_out``; if the samples run out first, each batch still owed repeats one sample (counted in
``repeated``). Memory is O(window); the trade-off is the window: larger packs fuller and sorts more.
The pool and its takes are ``pool.py``'s (in C when built).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice

from .pool import Entry, pool_loops, take_run

MODES = ("pack", "pad")
# Tops the pool up: (pool, wanted, arrival) -> the next arrival, having added at most ``wanted`` entries
# (cost, arrival, id) with insort, costs in [0, budget]; fewer than ``wanted`` means the samples ran out.
TopUp = Callable[[list[Entry], int, int], int]


@dataclass
class BatchCounts:
    """What a worker's batching left out (``left_out``: samples, ``left_out_cost``) and repeated."""

    left_out: int = 0
    left_out_cost: int = 0
    repeated: int = 0
    batches: int = 0
    costs: list[int] = field(default_factory=list)  # each batch's cost as its mode counts it


def batch_cost(costs: list[int], mode: str) -> int:
    """A batch's cost: the sum ("pack") or count x largest ("pad")."""
    return sum(costs) if mode == "pack" else len(costs) * max(costs, default=0)


class PacedBatcher:
    """The batcher with its state in attributes, current at every batch handed out (a chain node saves
    them): ``pool`` ((cost, arrival, id), sorted), ``cost_left`` and ``samples_left`` (what the items to
    come and the pool still add up to, as told), ``arrival`` (items taken in), ``last`` (the id a
    shortfall repeats), ``counts``.

    ``budget``, ``target``, ``window``, ``mode``: as ``paced_batches`` takes them; ``cost`` and
    ``samples``: what all the items add up to; ``fill``: how full unpaced batches come out (the probe's;
    1: a batch stops at its even share of the cost left); ``native``: the pool's loops in C when built
    (False: in Python; the same batches either way, see ``pool_loops``)."""

    def __init__(
        self,
        *,
        budget: int,
        target: int,
        cost: int,
        samples: int,
        window: int = 64,
        mode: str = "pack",
        counts: BatchCounts | None = None,
        fill: float = 1.0,
        native: bool = True,
    ) -> None:
        check_batching(budget=budget, window=window, mode=mode)
        if target < 1:
            raise ValueError(f"target must be >= 1, not {target}")
        if not 0 < fill <= 1:
            raise ValueError(f"fill must be in (0, 1], not {fill!r}")
        # What an unpaced batch leaves of the budget on average: a batch may pass its share by that much,
        # so the full ones make up for the ones nothing more fits in (capped at the share, the mean fell
        # below the probed fill and the deficit, known only at the end, was left out).
        self.slack = round(budget * (1 - fill))
        self.room = budget * fill  # what a batch holds on average, unpaced
        self.budget, self.target, self.window, self.mode = budget, target, window, mode
        self.counts = counts if counts is not None else BatchCounts()
        self.loops = pool_loops(native)
        self.pool: list[Entry] = self.loops.new(())
        self.cost_left, self.samples_left = cost, samples
        self.arrival = 0
        self.last: Hashable | None = None

    def _top_up(self, top_up: TopUp) -> bool:
        """The pool topped up to the window; whether the samples ran out."""
        wanted = self.window - len(self.pool)
        arrival = top_up(self.pool, wanted, self.arrival)
        exhausted, self.arrival = arrival - self.arrival < wanted, arrival
        return exhausted

    def run(
        self, items: Iterable[tuple[int, Hashable]], *, drain: bool = True, top_up: TopUp | None = None
    ) -> Iterator[list[Hashable]]:
        """The batches still owed, from the pool and ``items``; then what is left, counted: by reading
        the items to the end (``drain``), or, without reading them, as ``samples_left`` says. ``top_up``:
        how the pool is topped up instead of from ``items`` (a node's own loop: see ``TopUp``)."""
        counts, pool, budget, window = self.counts, self.pool, self.budget, self.window
        room, slack, loops, pack = self.room, self.slack, self.loops, self.mode == "pack"
        take, fit = loops.take, loops.fit
        source = iter(items)
        top_up = top_up if top_up is not None else _top_up_from(source, budget, loops.insort)
        note_cost = counts.costs.append
        exhausted = False
        # Per batch, on locals: the attributes are written as they change (a node saves them at a yield).
        while counts.batches < self.target:
            if not exhausted and len(pool) < window:
                exhausted = self._top_up(top_up)
            owed = self.target - counts.batches
            if not pool:  # out of samples with batches owed: repeat one, counted (none at all: empty)
                batch = [self.last] if self.last is not None else []
                counts.repeated += len(batch)
                cost = 0
            else:
                cost_left = self.cost_left
                # The last batch fills to the budget, not to its share: what it leaves is left out.
                if owed > 1 and pack and cost_left <= (owed - 1) * room:
                    # Ahead: the batches after this one hold the rest at the probed fill, so this one
                    # stops at its share (and the slack), spreading the samples over every batch owed.
                    share = -(-max(cost_left, 0) // owed) + slack
                else:  # behind, or the last batch: as full as it gets; what is left at the end is lost
                    share = budget + 1
                most = max(1, self.samples_left - (owed - 1))  # leave a sample for every batch still owed
                if not pack:
                    batch, total, cost = take_run(pool, budget, share, most)
                else:
                    batch, total = take(pool, budget, share, most)
                    if owed == 1:
                        # ... and keeps topping the window up while something more fits.
                        while not exhausted and total < budget and len(batch) < most and len(pool) < window:
                            exhausted = self._top_up(top_up)
                            total = fit(pool, batch, total, budget, share, most)
                    cost = total
                self.cost_left = cost_left - total
                self.samples_left -= len(batch)
                self.last = batch[0]
            counts.batches += 1
            note_cost(cost)
            yield batch
        if not drain:
            counts.left_out += max(self.samples_left, 0)
            counts.left_out_cost += max(self.cost_left, 0)
            pool.clear()
            return
        for item_cost, _, _ in pool:
            counts.left_out += 1
            counts.left_out_cost += item_cost
        pool.clear()
        for item_cost, _ in source:
            counts.left_out += 1
            counts.left_out_cost += item_cost


def _top_up_from(
    source: Iterator[tuple[int, Hashable]], budget: int, insort: Callable[[list[Entry], Entry], None]
) -> TopUp:
    """The default ``TopUp``: (cost, id) pairs taken from ``source``, each cost checked against the budget."""

    def top_up(pool: list[Entry], wanted: int, arrival: int) -> int:
        for item_cost, ident in islice(source, wanted):  # a for loop, not a next() per item
            if not 0 <= item_cost <= budget:
                raise ValueError(f"sample {ident!r} costs {item_cost}, outside [0, budget={budget}]")
            insort(pool, (item_cost, arrival, ident))
            arrival += 1
        return arrival

    return top_up


def paced_batches(
    items: Iterable[tuple[int, Hashable]],
    *,
    budget: int,
    target: int,
    cost: int,
    samples: int,
    window: int = 64,
    mode: str = "pack",
    counts: BatchCounts | None = None,
    fill: float = 1.0,
    native: bool = True,
) -> Iterator[list[Hashable]]:
    """Exactly ``target`` batches (lists of ids) of ``items`` ((cost, id) pairs, each cost in [0, budget]).

    ``cost`` and ``samples``: what ``items`` add up to (they pace the batches; the count holds whatever
    they are); ``counts``: filled in as batches go out; ``fill``, ``native``: as ``PacedBatcher`` takes
    them."""
    batcher = PacedBatcher(
        budget=budget,
        target=target,
        cost=cost,
        samples=samples,
        window=window,
        mode=mode,
        counts=counts,
        fill=fill,
        native=native,
    )
    return batcher.run(items)


def unpaced_batches(
    costs: Iterable[int], *, budget: int, window: int, mode: str, native: bool = True
) -> tuple[list[int], list[int]]:
    """The real cost of each batch the window makes with no target to pace to (as full as batches get):
    those made while it is full, and those made draining it at the end. What ``target.py`` probes.
    ``native``: as ``PacedBatcher`` takes it."""
    loops = pool_loops(native)
    take = take_run if mode == "pad" else loops.take
    pool = loops.new(())
    full = []
    for arrival, cost in enumerate(costs):
        loops.insort(pool, (cost, arrival, arrival))
        if len(pool) >= window:
            full.append(take(pool, budget, budget + 1, len(pool))[1])
    drained = []
    while pool:
        drained.append(take(pool, budget, budget + 1, len(pool))[1])
    return full, drained


def check_batching(*, budget: int, window: int, mode: str) -> None:
    """ValueError naming the bad option."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"batch budget must be a positive integer, not {budget!r}")
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"batch window must be a positive integer, not {window!r}")
    if mode not in MODES:
        raise ValueError(f"batching must be one of {', '.join(MODES)}, not {mode!r}")
