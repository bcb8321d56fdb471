"""The chain's budget node: decoded samples into batches within a token budget, exactly the target's.

Last in the chain (after decoding), it hands out a list of samples per item, each with its ``__cost__``
(the budget for one ``overlong="truncate"`` cut); ``ShardDataset(batch_tokens=...)`` puts it there and
plans its epoch (``plan.slot_plan``). Its state names the samples in its window by id, as the shuffle
buffer's does, so a restore re-reads at most ``window`` samples. The window holds decoded samples: a
wide "pad" window of large images costs memory (reading the ids only is for later). Its per-sample loop
runs in C (``_pool.c``) when it is built, the same loop in Python (``feed_pool``) when not.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from typing import Any

from ..chain.node import Item, Node, is_int, state_id, state_int, state_keys_of
from ..datasets.shared import SharedState
from .batcher import PacedBatcher, TopUp
from .columns import CostColumns
from .plan import BudgetOptions, SlotPlan
from .pool import NativePool
from .target import admit

ARRIVALS = 2**62  # the most samples a worker's epoch can have taken in: the C pool keeps them as int64
LISTED_SHARDS = 64  # the shards a shuffle buffer of 1,000 mixes at once, with room


class BudgetBatches(Node):
    """State: ``{"source": ..., "pool": [[shard, index, cost, arrival], ...], "batches": n, "cost_left": c,
    "samples_left": n, "arrival": n, "last": [shard, index] | None, "target": n}`` (the target saved: after
    an elastic restore it comes from what was left, which a later resume no longer knows).

    ``source``: the chain before it (decoded samples); ``plan``: this worker's epoch (its target, cost and
    samples); ``options``: the budget; ``costs``: the cost column reader; ``counters``: where overlong and
    left-over samples are counted (None: nowhere); ``native``: the per-sample loops in C when built (False:
    in Python, ``feed_pool`` and ``pool.pool_loops``; the same batches either way)."""

    state_keys = frozenset({"pool", "batches", "cost_left", "samples_left", "arrival", "last", "target"})

    def __init__(
        self,
        source: Node,
        plan: SlotPlan,
        options: BudgetOptions,
        costs: CostColumns,
        counters: SharedState | None = None,
        native: bool = True,
    ) -> None:
        super().__init__()
        self.source = source
        self.native = native
        self.plan, self.options, self.costs, self.counters = plan, options, costs, counters
        self._batcher = self._new_batcher()

    def _new_batcher(self) -> PacedBatcher:
        o, p = self.options, self.plan
        return PacedBatcher(
            budget=o.budget,
            target=p.target,
            cost=p.cost,
            samples=p.samples,
            window=o.window,
            mode=o.mode,
            fill=p.probe.fill,
            native=self.native,
        )

    def _current_state(self) -> dict[str, Any]:
        b = self._batcher
        last = [b.last[0], b.last[1]] if b.last is not None else None  # type: ignore[index]
        return {
            "source": self._source_state(),
            "pool": [[item[0], item[1], cost, arrival] for cost, arrival, item in b.pool],  # type: ignore[index]
            "batches": b.counts.batches,
            "cost_left": b.cost_left,
            "samples_left": b.samples_left,
            "arrival": b.arrival,
            "last": last,
            "target": b.target,
        }

    def check_state(self, state: Any) -> None:
        """Ids, costs and counts of the types and ranges this node saves; ValueError naming the key."""
        state_keys_of(self, state, self.state_keys | {"source"})
        target = state_int(self, state, "target", 1)
        state_int(self, state, "batches", 0, target)
        state_int(self, state, "arrival", 0, ARRIVALS)
        for key in ("cost_left", "samples_left"):
            state_int(self, state, key, -(2**62), 2**62)
        pool = state["pool"]
        if not isinstance(pool, (list, tuple)) or len(pool) > self.options.window:
            raise ValueError(
                f"the saved BudgetBatches state has pool={pool!r:.60}; it holds at most a window"
            )
        for entry in pool:
            if not isinstance(entry, (list, tuple)) or len(entry) != 4:
                raise ValueError(f"the saved BudgetBatches state has pool entry {entry!r:.60}")
            state_id(self, entry[:2], "pool id")
            cost, arrival = entry[2], entry[3]
            if not is_int(cost) or not 0 <= cost <= self.options.budget:
                raise ValueError(
                    f"the saved BudgetBatches state has a pool cost {cost!r:.60}: not an int in "
                    f"[0, {self.options.budget}] (the budget)"
                )
            if not is_int(arrival) or not 0 <= arrival <= ARRIVALS:
                raise ValueError(
                    f"the saved BudgetBatches state has a pool arrival {arrival!r:.60}: not an int in "
                    f"[0, {ARRIVALS}]"
                )
        if state["last"] is not None:
            state_id(self, state["last"], "last")

    def _generate(self, state: dict[str, Any] | None) -> Iterator[Item]:
        source = self.source
        source.reset(state["source"] if state else None)  # type: ignore[union-attr]
        batcher = self._batcher = self._new_batcher()
        if state:
            read = source.read_one  # type: ignore[union-attr]
            entries = (
                (int(c), int(a), (s, i, _with_cost(read(s, i), int(c)))) for s, i, c, a in state["pool"]
            )
            batcher.pool = batcher.loops.new(entries)
            batcher.target = state["target"]
            batcher.counts.batches = state["batches"]
            batcher.cost_left, batcher.samples_left = state["cost_left"], state["samples_left"]
            batcher.arrival = state["arrival"]
            last = state["last"]
            batcher.last = (last[0], last[1], None) if last is not None else None
        for batch in batcher.run((), drain=False, top_up=self._top_up()):
            out = [item[2] if item[2] is not None else self._sample(item) for item in batch]
            first = batch[0] if batch else (0, 0)
            yield first[0], first[1], out  # type: ignore[index]
        if self.counters is not None and batcher.counts.left_out:
            self.counters.add("samples_left_out", batcher.counts.left_out)
        if self.counters is not None and batcher.counts.repeated:  # a slot held fewer samples than batches
            self.counters.add("samples_repeated", batcher.counts.repeated)

    def _top_up(self) -> TopUp:
        """The batcher's pool topped up straight from the source: every sample the overlong rule keeps
        goes in as (cost, arrival, (shard, index, sample)), the rest counted. One loop per sample, on
        locals (a generator between the source and the batcher cost a worker a tenth of its time); each
        shard's costs become a list once while the buffer mixes it (a shuffled stream changes shard at
        almost every sample: a numpy lookup per sample costs more than the batching)."""
        budget, overlong = self.options.budget, self.options.overlong
        counters, column = self.counters, self.costs
        source = iter(self.source)  # type: ignore[call-overload]
        lists: dict[int, list[int]] = {}  # the shards the buffer is mixing now, as lists: no numpy scalars
        feed = pool_feed(self.native)

        def load(shard: int) -> list[int]:
            if len(lists) >= LISTED_SHARDS:
                lists.clear()
            costs = lists[shard] = column(shard).tolist()
            return costs

        def over(cost: int) -> int | None:
            admitted = admit(cost, budget, overlong)
            if counters is not None:
                counters.add("samples_overlong")
            return admitted

        def top_up(pool: list[tuple[int, int, Any]], wanted: int, arrival: int) -> int:
            return feed(pool, source, wanted, arrival, lists, load, budget, over)

        return top_up

    def _sample(self, item: Any) -> Any:
        """A sample known by id only (a repeat after a restore), read again, with its cost."""
        shard, index, _ = item
        cost = min(int(self.costs(shard)[index]), self.options.budget)
        return _with_cost(self.source.read_one(shard, index), cost)  # type: ignore[union-attr]


def pool_feed(native: bool = True) -> Callable[..., int]:
    """The top-up loop: in C (``_pool.feed``) when ``native`` and it is built, else ``feed_pool``."""
    return NativePool.feed if native and NativePool is not None else feed_pool


def feed_pool(
    pool: list[tuple[int, int, Any]],
    source: Iterator[Item],
    wanted: int,
    arrival: int,
    lists: dict[int, list[int]],
    load: Callable[[int], list[int]],
    budget: int,
    over: Callable[[int], int | None],
) -> int:
    """The pool topped up with ``wanted`` samples of ``source``, (shard, index, sample) each, as
    (cost, arrival, (shard, index, sample)) (a dict sample gets its ``__cost__``); the next arrival.
    A sample's cost is ``lists[shard][index]`` (``load(shard)`` when the shard is not listed); one over
    the budget is what ``over(cost)`` makes of it (None: skipped). ``_pool.feed`` is the same loop in C."""
    goal = arrival + wanted
    listed, insort = lists.get, bisect.insort
    for shard, index, sample in source:
        costs = listed(shard)
        if costs is None:
            costs = load(shard)
        cost = costs[index]
        if cost > budget:
            cost = over(cost)  # type: ignore[assignment]
            if cost is None:
                continue
        if type(sample) is dict:
            sample["__cost__"] = cost
        insort(pool, (cost, arrival, (shard, index, sample)))
        arrival += 1
        if arrival == goal:
            break
    return arrival


def _with_cost(sample: Any, cost: int) -> Any:
    """``sample`` with its ``__cost__``, when it is a dict (a ``decode=fn`` may return anything)."""
    if isinstance(sample, dict):
        sample["__cost__"] = cost
    return sample
