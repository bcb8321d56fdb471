"""The budget pool: a worker's window of (cost, arrival, id) entries sorted by (cost, arrival), and the
takes that make a batch of it ("pack": the largest first, then the largest that still fits; "pad": the
run of like costs that wastes least).

Trade-off: the pool is the C type of ``_pool.c`` when it is built (its keys in C arrays stay in cache
while the reading runs), else a list with the same loops in Python; ``pool_loops`` picks, and both give
the same batches. A pool reads as the sorted list of its entries either way.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

import numpy as np

try:  # the pool in C (_pool.c); without a compiler, a list and the same loops in Python
    from ._pool import Pool as NativePool
except ImportError:
    NativePool = None  # type: ignore[assignment,misc]

Entry = tuple[int, int, Hashable]  # a pool entry: (cost, arrival, id), sorted by cost then arrival
_AFTER = float("inf")  # an arrival after every entry's


@dataclass(frozen=True)
class PoolLoops:
    """The pool and its per-sample loops: ``new(entries)`` (a pool of them, sorted), ``insort(pool,
    entry)`` (bisect.insort: arrivals are unique, so an entry's (cost, arrival) places it), and the "pack"
    take: ``take(pool, budget, share, most)`` -> (ids, total) and ``fit(pool, ids, total, budget, share,
    most)`` -> total (``take_pack``, ``fit_pack``). A pool reads as a sorted list of entries either way."""

    new: Callable[[Iterable[Entry]], list[Entry]]
    insort: Callable[[list[Entry], Entry], None]
    take: Callable[[list[Entry], int, int, int], tuple[list[Hashable], int]]
    fit: Callable[[list[Entry], list[Hashable], int, int, int, int], int]


def pool_loops(native: bool = True) -> PoolLoops:
    """The pool in C (``_pool.c``) when ``native`` and it is built; else a list and the same loops in
    Python."""
    if native and NativePool is not None:
        return PoolLoops(NativePool, NativePool.insort, NativePool.take, NativePool.fit)
    return PoolLoops(sorted, bisect.insort, take_pack, fit_pack)


def cut_pool(pool: list[Entry], lo: int, hi: int) -> list[Entry]:
    """``pool[lo:hi]``, taken out of ``pool`` (a list or the C pool)."""
    if isinstance(pool, list):
        run = pool[lo:hi]
        del pool[lo:hi]
        return run
    return pool.cut(lo, hi)  # type: ignore[attr-defined]


def pool_costs(pool: list[Entry]) -> np.ndarray:
    """Every entry's cost in pool order, int64 (the C pool's array as it is; a list's read entry by entry)."""
    if isinstance(pool, list):
        return np.fromiter((entry[0] for entry in pool), dtype=np.int64, count=len(pool))
    return np.frombuffer(pool.costs(), dtype=np.int64)  # type: ignore[attr-defined]


def take_pack(pool: list[Entry], budget: int, share: int, most: int) -> tuple[list[Hashable], int]:
    """One "pack" batch's ids, taken out of the (non-empty) pool, and its cost: its largest first, then
    the largest that still fits, until the batch holds ``share``, ``most`` samples, or nothing more fits."""
    cost, _, ident = pool.pop()
    ids = [ident]
    return ids, fit_pack(pool, ids, cost, budget, share, most)


def fit_pack(pool: list[Entry], ids: list[Hashable], total: int, budget: int, share: int, most: int) -> int:
    """Moves the pool's largest entry that still fits into the batch (``ids``, costing ``total``) while
    it holds less than ``share`` and ``most`` entries; its cost after."""
    while pool and len(ids) < most and total < share:
        room = budget - total
        if pool[-1][0] <= room:  # the pool's largest still fits: no search
            entry = pool.pop()
        else:
            # The largest that still fits: entries sort by (cost, arrival), so (room, inf) follows every
            # entry of cost <= room; compared in C, without a key function called per probe.
            at = bisect.bisect_right(pool, (room, _AFTER)) - 1
            if at < 0:
                break
            entry = pool.pop(at)
        ids.append(entry[2])
        total += entry[0]
    return total


def take_run(pool: list[Entry], budget: int, share: int, most: int) -> tuple[list[Hashable], int, int]:
    """The padded batch that wastes least, its ids, real cost and padded cost: for each pool entry as the
    batch's largest, the entries just below it, as many as the budget allows (count x largest); the one
    holding the most real cost (ties: the larger entry), then cut to the fewest of its largest that
    reach ``share``. The pool is sorted, so a run of neighbours is a run of like costs."""
    costs = pool_costs(pool)
    prefix = np.concatenate(([0], np.cumsum(costs)))
    tops = np.arange(len(pool))
    with np.errstate(divide="ignore"):
        room = np.where(costs > 0, budget // np.maximum(costs, 1), len(pool))
    count = np.minimum(np.minimum(room, tops + 1), max(1, most))
    real = prefix[tops + 1] - prefix[tops + 1 - count]
    # What the batch leaves of the budget (padding and room alike): the fullest run of like costs.
    waste = budget - real
    top = int(len(pool) - 1 - np.argmin(waste[::-1]))  # the smallest waste; of equals, the largest entry
    take = int(count[top])
    reached = np.nonzero(np.cumsum(costs[top - take + 1 : top + 1][::-1]) >= share)[0]
    if len(reached):
        take = int(reached[0]) + 1
    run = cut_pool(pool, top - take + 1, top + 1)
    return [entry[2] for entry in reversed(run)], sum(entry[0] for entry in run), len(run) * run[-1][0]
