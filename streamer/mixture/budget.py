"""A Mixture under a token budget: each source's epoch run dealt to the slots by cost, then batched.

The plan still fixes how many samples of each source an epoch reads (shares in samples, or in cost with
``weight_by="tokens"``: a weight then buys cost, so a source of long samples gets fewer of them). What
the budget changes is who reads them: each source's run of its pass stream is cut into equal-cost
slices, one per rank and worker, each sample going to the slice its cost-before falls in (as
``ShardDataset``'s deal does), so every slot holds the epoch's cost over the slots within one sample per
source, and one target, computed alike everywhere, fits them all. A worker reads its slices as an
elastic restore's spans (``PlanStream``) and the budget node batches them. Trade-off: workers read a few
samples more or fewer of a source than each other, and a budgeted mixture is not restored elastically
(yet): it resumes on the same world size and workers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, replace
from fractions import Fraction
from typing import Any

import numpy as np

from shardstream.io.openers import OpenOptions

from ..budget.columns import CostColumns, check_costed
from ..budget.deal import slot_bounds
from ..budget.plan import (
    BudgetOptions,
    SlotPlan,
    first_costs,
    probe_shape,
    slot_totals,
    weighed_sums,
    weights,
)
from ..budget.target import Probe, probe, target_batches
from ..elastic.deal import Plan
from ..placement.segments import Segment
from ..placement.shards import ShardList
from .passes import PassStream
from .plan import Share
from .rest import Restored
from .source import MixSource, source_of

WEIGHT_BY = ("samples", "tokens")


class MixCosts:
    """``costs(shard)``: the costs of a mixture shard (its number in the mixture's list), from its source's
    cost column."""

    def __init__(self, columns: Sequence[CostColumns], bases: Sequence[int]) -> None:
        self.columns, self.bases = list(columns), list(bases)

    def __call__(self, shard: int) -> np.ndarray:
        j = source_of(self.bases, shard)
        return self.columns[j](shard - self.bases[j])


class MixtureBudget:
    """A mixture's budget: ``options``, the cost columns (``costs``, by mixture shard), every shard's cost
    as the overlong rule keeps it (``sums``, read once when made), and the probe per slot count."""

    def __init__(
        self,
        options: BudgetOptions,
        shard_lists: Sequence[ShardList],
        bases: Sequence[int],
        opening: OpenOptions,
    ) -> None:
        self.options = options
        self.shard_lists = list(shard_lists)
        self.columns = [CostColumns(shards, opening) for shards in shard_lists]
        self.costs = MixCosts(self.columns, bases)
        self.counts = np.concatenate([np.asarray(s.counts, dtype=np.int64) for s in shard_lists])
        self.sums = np.concatenate(
            [
                weighed_sums(s.counts, c, options, sums=s.planned_cost_sums, tails=s.cost_tails)
                for s, c in zip(shard_lists, self.columns, strict=True)
            ]
        )
        self.bases = list(bases)
        self._weigh = weights(options)
        self._probes: dict[tuple[int, ...], Probe] = {}
        self.epoch_steps: dict[tuple[int, int], list[int]] = {}  # (world, workers): a rank's batches by epoch

    def source_costs(self) -> list[int]:
        """Each source's cost as the overlong rule keeps it."""
        ends = [*self.bases[1:], len(self.sums)]
        return [int(self.sums[a:b].sum()) for a, b in zip(self.bases, ends, strict=True)]

    def identity(self) -> str:
        """What a saved state's digest includes: the budget's options."""
        return repr(sorted(asdict(self.options).items()))

    # -- the deal ----------------------------------------------------------------------------------------
    def deal(
        self,
        streams: Sequence[PassStream],
        runs: Sequence[tuple[int, int]],
        *,
        slot: int,
        slots: int,
    ) -> tuple[list[int], list[Plan], SlotPlan]:
        """Slot ``slot``'s slice of every source's run (``runs``: [start, end) of each pass stream): its
        per-source budgets, its spans, and its batching plan (the target every slot meets)."""
        budgets, plans, segments, total = [], [], [], 0
        for stream, (start, end) in zip(streams, runs, strict=True):
            pieces = [(seg, self._cost(seg)) for seg in stream.segments(start, end)]
            cost = sum(c for _, c in pieces)
            total += cost
            begin_cost, end_cost = slot_bounds(cost, slots, slot)
            first = self._position(pieces, begin_cost) if slot else 0
            last = self._position(pieces, end_cost) if slot < slots - 1 else end - start
            budgets.append(last - first)
            spans = ((start + first, start + last),) if last > first else ()
            plans.append(Plan((), spans))
            segments += [s for a, b in spans for s in stream.segments(a, b)]
        probed = self.probe_for(streams, runs, slots)
        plan = SlotPlan(segments, self._target(total, probed, slots), probe=probed)
        plan.cost, plan.samples = slot_totals(segments, self.costs, self.options)
        return budgets, plans, plan

    def epoch_target(self, streams: Sequence[PassStream], runs: Sequence[tuple[int, int]], slots: int) -> int:
        """The batches every slot makes of these runs (what ``deal`` plans), from their cost alone."""
        total = sum(
            self._cost(seg)
            for stream, (a, b) in zip(streams, runs, strict=True)
            for seg in stream.segments(a, b)
        )
        return self._target(total, self.probe_for(streams, runs, slots), slots)

    def _target(self, total: int, probed: Probe, slots: int) -> int:
        return target_batches(total, slots, budget=self.options.budget, probe=probed.weighed())

    def _cost(self, segment: Segment) -> int:
        shard, start, stop = segment.shard, segment.start, segment.stop
        whole = int(self.counts[shard])
        if start == 0 and (stop is None or stop == whole):
            return int(self.sums[shard])
        return int(self._weigh(self.costs(shard)[start:stop]).sum())

    def _position(self, pieces: list[tuple[Segment, int]], bound: int) -> int:
        """How many samples of the run cost less than ``bound`` before them: where a slice begins."""
        position = before = 0
        for segment, cost in pieces:
            stop = int(self.counts[segment.shard]) if segment.stop is None else segment.stop
            if before + cost < bound:  # every sample of the segment starts before the bound
                position += stop - segment.start
                before += cost
                continue
            weighed = self._weigh(self.costs(segment.shard)[segment.start : stop])
            starts = before + np.concatenate(([0], np.cumsum(weighed)[:-1]))
            return position + int(np.searchsorted(starts, bound, side="left"))
        return position

    # -- the probe ---------------------------------------------------------------------------------------
    def probe_for(self, streams: Sequence[PassStream], runs: Sequence[tuple[int, int]], slots: int) -> Probe:
        """Unpaced batches of the sources' first samples in index order, each source's share of them as its
        share of the epoch, interleaved evenly; as many as a slot holds when fewer than the probe wants."""
        sizes = tuple(end - start for start, end in runs)
        key = (*sizes, slots)
        if key not in self._probes:
            o = self.options
            window, wanted = probe_shape(sum(sizes), slots, o)
            costs = _interleaved(
                [self._first_costs(j, -(-wanted * n // max(sum(sizes), 1))) for j, n in enumerate(sizes)]
            )
            self._probes[key] = probe(costs, budget=o.budget, window=window, mode=o.mode, overlong=o.overlong)
        return self._probes[key]

    def _first_costs(self, j: int, wanted: int) -> list[int]:
        """Source ``j``'s first ``wanted`` costs, its shards in index order."""
        counts = np.asarray(self.shard_lists[j].counts)
        return list(first_costs(counts, self.columns[j], seed=0, epoch=0, shuffle=False, wanted=wanted))


def _interleaved(lists: list[list[int]]) -> Iterator[int]:
    """The lists merged by each item's relative place in its own list (even interleave)."""
    keyed = [((i + 0.5) / len(items), j, c) for j, items in enumerate(lists) for i, c in enumerate(items)]
    return (c for _, _, c in sorted(keyed))


def check_budgeted(options: BudgetOptions | None, *, stratify: int | None, weight_by: str) -> None:
    """ValueError naming the option a budgeted (or any) mixture cannot take."""
    if weight_by not in WEIGHT_BY:
        raise ValueError(f"weight_by must be one of {', '.join(WEIGHT_BY)}, not {weight_by!r}")
    if options is not None and stratify is not None:
        raise ValueError("stratify sets a batch size; with batch_tokens the budget makes the batches")


def token_shares(
    sources: Sequence[MixSource],
    shard_lists: Sequence[ShardList],
    weight_by: str,
    budget: MixtureBudget | None = None,
) -> list[Share]:
    """Each source's share of the epoch; with ``weight_by="tokens"`` each weight turned into a weight of
    samples that buys that share of cost: divided by the source's mean cost per sample, as the budget
    weighs it (the overlong rule applied) or, without one, as the index sums it."""
    shares = [s.share(int(shards.total)) for s, shards in zip(sources, shard_lists, strict=True)]
    if weight_by == "samples":
        return shares
    costs = budget.source_costs() if budget is not None else None
    out = []
    for j, (share, shards) in enumerate(zip(shares, shard_lists, strict=True)):
        if share.kind != "weight":
            out.append(share)
            continue
        check_costed(shards)
        if costs is None and shards.kept is not None:
            raise ValueError(
                f"source {share.name!r}: weight_by='tokens' weighs a subset's kept samples with batch_tokens"
            )
        total = int(costs[j]) if costs is not None else int(np.sum(shards.cost_sums))
        samples = int(shards.total or 0)
        if total < 1:
            raise ValueError(
                f"source {share.name!r}: weight_by='tokens' needs costs, and its samples cost 0 in all"
            )
        out.append(replace(share, value=Fraction(share.value) / Fraction(total, samples)))
    return out


def budget_deal(mixture: Any, place: tuple[int, int, int, int], epoch: int) -> tuple[Restored, SlotPlan]:
    """A budgeted mixture's slice of every source's epoch run for ``place`` (rank, world, worker,
    workers), by cost, as a restore's deal; and its batching plan."""
    rank, world, worker, workers = place
    plan = mixture.plan(world, workers)
    runs = epoch_runs(mixture, plan, epoch)
    budgets, plans, slot = mixture.budget.deal(
        _pass_streams(mixture), runs, slot=rank * workers + worker, slots=world * workers
    )
    sources = {n: [s, e - s] for n, (s, e) in zip(mixture.names, runs, strict=True)}
    return Restored(budgets, plans, sources, by="budget"), slot


def epoch_runs(mixture: Any, plan: Any, epoch: int) -> list[tuple[int, int]]:
    """Each source's run of its pass stream in ``epoch``: [start, end); ValueError for a carry, which a
    budgeted mixture cannot read."""
    at = mixture.positions(epoch, plan)
    if any(p.carry for p in at):
        raise ValueError("a Mixture with batch_tokens cannot read a source's carry (Mixture.load_state_dict)")
    return [(p.start, p.start + n) for p, n in zip(at, plan.per_epoch(), strict=True)]


def _pass_streams(mixture: Any) -> list[PassStream]:
    return [mixture.shape.pass_stream(j) for j in range(len(mixture.names))]


def budget_first_step(mixture: Any, world: int, workers: int, epoch: int) -> int:
    """The global step at which a budgeted mixture's ``epoch`` begins on ``world`` ranks of ``workers``
    DataLoader workers: the batches a rank yields in every earlier epoch, summed (each epoch reads other
    parts of the sources' passes, so their counts differ). Each epoch's count is planned from its runs'
    cost once per process and topology, and kept."""
    counted = mixture.budget.epoch_steps.setdefault((world, workers), [])
    if len(counted) < epoch:
        plan, streams = mixture.plan(world, workers), _pass_streams(mixture)
        while len(counted) < epoch:
            runs = epoch_runs(mixture, plan, len(counted))
            counted.append(mixture.budget.epoch_target(streams, runs, world * workers) * workers)
    return sum(counted[:epoch])


def mixture_steps(mixture: Any, workers: int) -> int:
    """The batches a rank of a budgeted mixture yields this epoch through ``workers`` DataLoader workers."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ValueError(f"workers must be an int >= 0, not {workers!r}")
    rank, world = mixture.placement.resolve()
    slots = max(workers, 1)
    return budget_deal(mixture, (rank, world, 0, slots), mixture.epoch)[1].target * slots
