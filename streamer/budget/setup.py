"""What ShardDataset asks of a token budget: the options checked at construction, a place's epoch plan.

Kept here so the dataset only names the budget (a few calls), and the planning stays with its kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from ..chain.node import saved_state_of
from ..elastic.deal import Plan, Stream
from ..elastic.restore import rank_states
from ..placement.segments import shard_order
from .columns import CostColumns, check_costed
from .deal import WeighedStream, slot_span
from .elastic import deal_by_cost, left_cost
from .node import BudgetBatches
from .plan import (
    BudgetOptions,
    SlotPlan,
    epoch_probe,
    slot_plan,
    slot_totals,
    weighed_sums,
    weights,
)
from .target import Probe, target_batches

WINDOWS = {"pack": 64, "pad": 1024}  # pad needs runs of like costs, rare among 64 samples


class Budget:
    """A dataset's budget: its ``options``, its cost column reader (``costs``), every shard's cost as the
    overlong rule keeps it (``sums``), the shards' samples (``counts``) and the probe of the first shards
    in index order (``probed``), found once when the dataset is made, so no worker probes again each
    epoch. ``probe_for`` probes again, once per slot count, only where a slot holds fewer samples than
    the probe reads."""

    def __init__(self, options: BudgetOptions, costs: CostColumns, sums: Any, counts: Any) -> None:
        self.options, self.costs, self.sums, self.counts = options, costs, sums, counts
        self._probes: dict[int, Probe] = {}
        self.probed = self.probe_for(1)

    def probe_for(self, slots: int) -> Probe:
        """The probe for an epoch dealt to ``slots`` ranks x workers."""
        o = self.options
        per_slot = -(-int(np.sum(self.counts)) // slots)
        if slots != 1 and per_slot >= max(o.probe_samples, 64 * o.window):
            return self.probed  # a slot holds more than the probe reads: the same probe
        if slots not in self._probes:
            self._probes[slots] = epoch_probe(
                self.counts, self.costs, seed=0, epoch=0, shuffle=False, options=o, slots=slots
            )
        return self._probes[slots]


def budget_options_of(
    tokens: int | None, batching: str, window: int | None, overlong: str
) -> BudgetOptions | None:
    """The options ``batch_tokens=``, ``batching=``, ``batch_window=`` and ``overlong=`` ask for (None:
    no budget); the window defaults by mode. ValueError naming the option."""
    if tokens is None:
        return None
    return BudgetOptions(
        budget=tokens, mode=batching, window=window or WINDOWS.get(batching, 64), overlong=overlong
    )


def budget_of(
    shards: Any,
    placement: Any,
    opening: Any,
    tokens: int | None,
    batching: str,
    window: int | None,
    overlong: str,
) -> Budget | None:
    """The budget ``ShardDataset(batch_tokens=...)`` asked for (``opening``: the dataset's OpenOptions),
    or None; ValueError naming the option. Weighs every shard for the deal from the index's cost sums
    and tails, reading the cost column only of shards whose tail falls short (and the probe's)."""
    options = budget_options_of(tokens, batching, window, overlong)
    if options is None:
        return None
    check_costed(shards)
    if placement.resampled:
        raise ValueError("batch_tokens plans each epoch from its samples; resampled=True draws forever")
    costs = CostColumns(shards, opening)
    sums = weighed_sums(shards.counts, costs, options, sums=shards.planned_cost_sums, tails=shards.cost_tails)
    return Budget(options, costs, sums, shards.counts)


def budget_plan(dataset: Any, place: tuple[int, int, int, int], epoch: int) -> SlotPlan:
    """The epoch of one rank and worker under the dataset's budget."""
    rank, world, worker, workers = place
    p, budget = dataset.placement, dataset.budget
    return slot_plan(
        dataset.shards.counts,
        budget.sums,
        budget.costs,
        rank=rank,
        world=world,
        worker=worker,
        workers=workers,
        seed=p.seed,
        epoch=epoch,
        shuffle=p.shuffle,
        options=budget.options,
        probed=budget.probe_for(world * workers),
    )


def budget_identity(budget: Budget | None) -> dict[str, Any]:
    """What a saved state must share with the dataset that loads it: the budget's options ({} without)."""
    return {} if budget is None else {"budget": asdict(budget.options)}


def check_budget_state(state: Mapping[str, Any] | Sequence[Mapping[str, Any]], budget: Budget | None) -> None:
    """ValueError unless ``state`` (one state, or every rank's for an elastic restore, dataset or
    StatefulDataLoader states) was saved with this budget, or both without one."""
    wanted = budget_identity(budget).get("budget")
    if isinstance(state, Sequence):
        saved = [w.get("budget") for i, s in enumerate(state) for w in rank_states(s, i)[1]]
    else:
        saved = [state.get("budget")]
    for one in saved:
        if one != wanted:
            raise ValueError(
                f"the state was saved with batch_tokens options {one}, not {wanted}: batches depend on them, "
                "so load it into a dataset made with the same batch_tokens, batching, batch_window and "
                "overlong"
            )


def weighed_stream(dataset: Any, epoch: int) -> WeighedStream:
    """The dataset's epoch stream weighed by its budget."""
    p, budget = dataset.placement, dataset.budget
    order = shard_order(len(dataset.shards), p.seed, epoch, p.shuffle)
    return WeighedStream(dataset.shards.counts, budget.sums, order, budget.costs, weights(budget.options))


def budget_original(dataset: Any) -> Callable[[int, int, int, int, int], Plan]:
    """(epoch, rank, world, worker, workers) -> the span a budgeted worker reads when nothing was restored."""
    streams: dict[int, WeighedStream] = {}

    def original(epoch: int, rank: int, world: int, worker: int, workers: int) -> Plan:
        stream = streams.get(epoch) or streams.setdefault(epoch, weighed_stream(dataset, epoch))
        return slot_span(stream, rank=rank, world=world, worker=worker, workers=workers)

    return original


def budget_held(node: Mapping[str, Any]) -> list[list[int]]:
    """The ids a saved budgeted chain's batching window held."""
    own = saved_state_of(BudgetBatches, node)
    return [[int(e[0]), int(e[1])] for e in own["pool"]] if own is not None else []


def budget_restored(dataset: Any, place: tuple[int, int, int, int], epoch: int, left: Plan) -> SlotPlan:
    """A place's part of what an elastic restore left, by cost, and the target every new worker meets."""
    rank, world, worker, workers = place
    budget = dataset.budget
    stream = weighed_stream(dataset, epoch)
    plan = deal_by_cost(stream, left, rank=rank, world=world, worker=worker, workers=workers)
    segments = Stream(dataset.shards.counts, stream.order).segments(plan)
    probed = budget.probe_for(world * workers)
    target = target_batches(
        left_cost(stream, left), world * workers, budget=budget.options.budget, probe=probed.weighed()
    )
    slot = SlotPlan(segments, target, dealt=plan, probe=probed)
    slot.cost, slot.samples = slot_totals(segments, budget.costs, budget.options)
    return slot


def budget_steps(dataset: Any, workers: int) -> int:
    """The batches a rank yields in the dataset's epoch through ``workers`` DataLoader workers."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ValueError(f"workers must be an int >= 0, not {workers!r}")
    rank, world = dataset.placement.resolve()
    slots = max(workers, 1)
    return budget_plan(dataset, (rank, world, 0, slots), dataset.epoch).target * slots
