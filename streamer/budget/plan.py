"""One worker's epoch under a token budget, planned from costs alone: its slice, the target, its batches.

Pure functions of (counts, cost sums, cost columns, seed, epoch, place, options): what the stream does
with the samples' bytes later never changes them, and every rank computes the same target without asking
another. ``BudgetOptions`` is the knob record; ``slot_plan`` gives a worker's segments, target and
totals (``slot_totals``); ``slot_items`` its (cost, id) pairs in segment order, the overlong rule
applied and counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from ..elastic.deal import Plan
from ..placement.segments import Segment, shard_order
from .batcher import check_batching
from .deal import Column, cost_segments
from .target import OVERLONG, PROBE_SAMPLES, Probe, admit, probe, target_batches


@dataclass(frozen=True, kw_only=True)
class BudgetOptions:
    """``budget``: a batch's cost at most (tokens, or the unit of the cost column); ``mode``: "pack" (the
    costs sum to at most the budget) or "pad" (count x largest at most the budget); ``window``: samples the
    batcher chooses among (larger: fuller batches, more sorted by cost); ``overlong``: a sample over the
    budget is left out and counted ("skip"), cut to it ("truncate": its cost counts as the budget and the
    sample is marked), or an error ("error"); ``probe_samples``: samples of the epoch's first shards the
    fill is probed on (at least 64 windows' worth). "pad" wants a wide window (1,024: runs of like costs
    are rare in 64 samples of a log-normal spread); "pack" fills 99.8% at 64."""

    budget: int
    mode: str = "pack"
    window: int = 64
    overlong: str = "skip"
    probe_samples: int = PROBE_SAMPLES

    def __post_init__(self) -> None:
        check_batching(budget=self.budget, window=self.window, mode=self.mode)
        if self.overlong not in OVERLONG:
            raise ValueError(f"overlong must be one of {', '.join(OVERLONG)}, not {self.overlong!r}")
        if isinstance(self.probe_samples, bool) or self.probe_samples < 1:
            raise ValueError(f"probe_samples must be a positive integer, not {self.probe_samples!r}")


@dataclass
class SlotPlan:
    """A worker's epoch: its ``segments``, the ``target`` batches every worker yields, and the cost and
    samples its segments hold once the overlong rule has been applied (``skipped``: samples it left out);
    ``dealt``: after an elastic restore, the part of the leftover the segments read."""

    segments: list[Segment]
    target: int
    dealt: Plan | None = None  # the part of an elastic restore's leftover these segments read
    cost: int = 0
    samples: int = 0
    skipped: int = 0
    truncated: int = 0
    probe: Probe = field(default_factory=Probe)


def slot_plan(
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
    shuffle: bool,
    options: BudgetOptions,
    probed: Probe | None = None,
) -> SlotPlan:
    """The plan of worker ``worker`` of rank ``rank``: reads the cost columns of the probe's shards, of
    the shards its slice's cuts fall in, and of its own shards (streamed, summed: O(1) memory).
    ``sums``: each shard's cost as the overlong rule keeps it (``weighed_sums``), so every slot holds the
    same cost the batcher will see, overlong samples or not; ``probed``: the probe, when the caller has
    it (a dataset probes once, when made); None probes the epoch's first shards here."""
    counts = np.asarray(counts, dtype=np.int64)
    sums = np.asarray(sums, dtype=np.int64)
    place = {"rank": rank, "world": world, "worker": worker, "workers": workers}
    weigh = weights(options)
    segments = cost_segments(
        counts, sums, column, **place, seed=seed, epoch=epoch, shuffle=shuffle, weigh=weigh
    )
    if probed is None:
        probed = epoch_probe(
            counts, column, seed=seed, epoch=epoch, shuffle=shuffle, options=options, slots=world * workers
        )
    total = int(sums.sum())  # weighed as the overlong rule keeps costs: nothing left to discount
    target = target_batches(total, world * workers, budget=options.budget, probe=probed.weighed())
    plan = SlotPlan(segments, target, probe=probed)
    plan.cost, plan.samples = slot_totals(segments, column, options)
    return plan


def slot_totals(segments: list[Segment], column: Column, options: BudgetOptions) -> tuple[int, int]:
    """(cost, samples) of ``segments`` as the overlong rule keeps them, a numpy pass per segment (a
    Python step per sample cost a worker as much as its batching); "error" raises on the first
    overlong sample, as reading it would."""
    weigh, budget = weights(options), options.budget
    cost = samples = 0
    for segment in segments:
        costs = np.asarray(column(segment.shard), dtype=np.int64)[segment.start : segment.stop]
        over = costs > budget
        if options.overlong == "error" and over.any():
            admit(int(costs[np.argmax(over)]), budget, "error")
        cost += int(weigh(costs).sum())
        samples += len(costs) - (int(over.sum()) if options.overlong == "skip" else 0)
    return cost, samples


def epoch_probe(
    counts: np.ndarray,
    column: Column,
    *,
    seed: int,
    epoch: int,
    shuffle: bool,
    options: BudgetOptions,
    slots: int = 1,
) -> Probe:
    """Unpaced batches of the epoch's first shards (at least 64 windows of samples, or one slot's
    samples when a slot holds fewer): the same probe on every worker, which reads those shards' columns
    alike. ``slots``: the ranks x workers the epoch is dealt to."""
    window, wanted = probe_shape(int(np.sum(counts)), slots, options)
    return probe(
        first_costs(counts, column, seed=seed, epoch=epoch, shuffle=shuffle, wanted=wanted),
        budget=options.budget,
        window=window,
        mode=options.mode,
        overlong=options.overlong,
    )


def probe_shape(samples: int, slots: int, options: BudgetOptions) -> tuple[int, int]:
    """(window, samples) a probe batches for an epoch of ``samples`` dealt to ``slots``: the options'
    window and at least 64 windows of samples, or one slot's worth of both when a slot holds fewer."""
    per_slot = -(-samples // max(slots, 1))
    window = max(1, min(options.window, per_slot))
    return window, min(max(options.probe_samples, 64 * window), max(per_slot, 1))


def weights(options: BudgetOptions) -> Callable[[np.ndarray], np.ndarray]:
    """What each cost weighs when the epoch is dealt: as the overlong rule keeps it ("skip": nothing;
    "truncate": the budget; "error": itself, refused when read)."""
    budget, overlong = options.budget, options.overlong

    def weigh(costs: np.ndarray) -> np.ndarray:
        costs = np.asarray(costs, dtype=np.int64)
        if overlong == "error":
            return costs
        return np.where(costs <= budget, costs, 0 if overlong == "skip" else budget)

    return weigh


def weighed_sums(
    counts: np.ndarray,
    column: Column,
    options: BudgetOptions,
    *,
    sums: np.ndarray | None = None,
    tails: np.ndarray | None = None,
) -> np.ndarray:
    """Every shard's cost as the overlong rule keeps it: what ``slot_plan`` deals by; a dataset computes it
    once, not per epoch. With the index's ``sums`` and ``tails`` (``ShardList.cost_tails``) a shard whose
    tail holds every cost over the budget is weighed from them (``tail_weighed``); the others, or all
    without tails, from their cost column, read once (O(samples) time, O(shards) memory)."""
    weigh = weights(options)
    out = np.zeros(len(counts), dtype=np.int64)
    exact = np.zeros(len(counts), dtype=bool)
    if sums is not None and options.overlong == "error":
        out[:], exact[:] = sums, True  # every cost weighs itself: the sums are the weights
    elif sums is not None and tails is not None:
        out, exact = tail_weighed(np.asarray(counts), np.asarray(sums), tails, options)
    for shard in np.flatnonzero(~exact):
        out[shard] = int(weigh(column(int(shard))).sum()) if counts[shard] else 0
    return out


def tail_weighed(
    counts: np.ndarray, sums: np.ndarray, tails: np.ndarray, options: BudgetOptions
) -> tuple[np.ndarray, np.ndarray]:
    """(weighed sums, exact): each shard's weighed cost from its sum and tail (largest costs first, -1
    past its end), exact where the tail holds every sample or its smallest is within the budget, so that
    no cost over the budget lies outside it (elsewhere the sum is a placeholder: read the column)."""
    budget = options.budget
    held = (tails >= 0).sum(axis=1)
    smallest = tails[np.arange(len(tails)), np.maximum(held - 1, 0)]
    exact = (held == counts) | ((held > 0) & (smallest <= budget))
    over = np.where(tails > budget, tails, 0)
    cut = over.sum(axis=1) if options.overlong == "skip" else np.where(over > 0, over - budget, 0).sum(axis=1)
    return np.asarray(sums, dtype=np.int64) - cut, exact


def slot_items(
    segments: list[Segment], column: Column, options: BudgetOptions, plan: SlotPlan | None = None
) -> Iterator[tuple[int, tuple[int, int]]]:
    """(cost, (shard, index)) of every sample of ``segments`` the overlong rule keeps, in order; ``plan``
    counts the ones it skips or truncates."""
    for segment in segments:
        costs = np.asarray(column(segment.shard))
        stop = len(costs) if segment.stop is None else segment.stop
        for index in range(segment.start, stop):
            raw = int(costs[index])
            cost = admit(raw, options.budget, options.overlong)
            if cost is None:
                if plan is not None:
                    plan.skipped += 1
                continue
            if cost != raw and plan is not None:
                plan.truncated += 1
            yield cost, (segment.shard, index)


def first_costs(
    counts: np.ndarray, column: Column, *, seed: int, epoch: int, shuffle: bool, wanted: int
) -> Iterator[int]:
    """The costs of the epoch's first shards, in its shard order, up to ``wanted`` samples."""
    given = 0
    for shard in shard_order(len(counts), seed, epoch, shuffle):
        if given >= wanted:
            return
        if not counts[shard]:
            continue
        costs = np.asarray(column(int(shard)))[: wanted - given]
        given += len(costs)
        yield from (int(c) for c in costs)
