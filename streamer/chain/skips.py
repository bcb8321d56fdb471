"""Skipped steps: the batches of chosen global steps left out on every rank alike, found from the plan.

A loss spike at step 41,200: restart from the checkpoint before it with ``skip_steps=[(41_200, 41_300)]``
and the data those steps would have trained on is passed over, on every rank, without reading the
epoch's plan differently. A step is a batch as the DataLoader hands it out: worker ``w``'s local batch
``j`` is the step ``step_of(batches, w, j)`` of its epoch (in order, round robin, a worker that is out of
batches passed over), counted from the first epoch's start (``epochs x steps an epoch``). Each worker
drops its own batches whose step is skipped, so every rank yields the same number of batches; what is
dropped is counted in ``ds.errors["samples_skipped_steps"]``. The trade-off: a skipped batch's samples
are still read and decoded (the node sits last: the shuffle buffer decides which samples a batch holds),
so a skip is for a few hundred steps, not for choosing data (a subset is for that).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ..placement.segments import worker_slice
from .node import Item, Node, state_int, state_keys_of


def check_skips(value: Any) -> tuple[tuple[int, int], ...]:
    """``skip_steps`` as sorted, merged (start, end) pairs, end exclusive; ValueError naming it."""
    if value is None:
        return ()
    try:
        pairs = [(start, end) for start, end in value]
    except (TypeError, ValueError):
        raise ValueError(f"skip_steps must be (start, end) pairs of steps, not {value!r:.80}") from None
    for start, end in pairs:
        if any(isinstance(x, bool) or not isinstance(x, int) for x in (start, end)) or not 0 <= start < end:
            raise ValueError(f"skip_steps: ({start!r}, {end!r}) is not a range of steps 0 <= start < end")
    merged: list[tuple[int, int]] = []
    for start, end in sorted(pairs):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


def check_skipping(
    skip_steps: Any, batch_size: Any, shards: Any, budget: Any
) -> tuple[tuple[tuple[int, int], ...], int | None]:
    """``ShardDataset``'s ``skip_steps`` and ``batch_size`` checked: the ranges, and the batch size they
    need to find a step's samples (not with ``batch_tokens``, whose items are batches); ValueError naming
    the argument."""
    skips = check_skips(skip_steps)
    if batch_size is not None and (
        isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
    ):
        raise ValueError(f"batch_size must be a positive int (the DataLoader's), not {batch_size!r}")
    if not skips:
        return skips, batch_size
    if shards.counts is None:
        raise ValueError("skip_steps plans from the index's counts: pass the packer's index, not a pattern")
    if budget is None and batch_size is None:
        raise ValueError("skip_steps needs batch_size (the DataLoader's) to know which samples a step holds")
    return skips, batch_size


def skipping(
    node: Node,
    skips: Sequence[tuple[int, int]],
    place: tuple[int, int, int, int],
    epoch: int,
    quota: int,
    batch_size: int | None,
    target: int | None,
    counters: Any,
    first_step: int | None = None,
) -> Node:
    """``node`` with the batches of ``skips`` left out: each worker's batches this epoch from the budget's
    ``target`` (each item a batch), or from the rank's ``quota`` of samples cut into ``batch_size``.
    ``first_step``: the global step the epoch begins at, where epochs differ in batches (None: ``epoch``
    times this epoch's)."""
    _, _, worker, workers = place
    if target is not None:
        per, batches = 1, [target] * workers
    else:
        per = batch_size or 1
        batches = [-(-worker_slice(quota, w, workers)[1] // per) for w in range(workers)]
    first = epoch * sum(batches) if first_step is None else first_step
    return SkipSteps(
        node, skips, per_batch=per, batches=batches, worker=worker, first_step=first, counters=counters
    )


def step_of(batches: Sequence[int], worker: int, local: int) -> int:
    """The epoch's step (from 0) at which a DataLoader hands out batch ``local`` of ``worker``, its
    workers making ``batches[w]`` batches each: every worker's batches before round ``local``, then the
    workers before this one that still have a batch in that round."""
    return sum(min(count, local) for count in batches) + sum(1 for count in batches[:worker] if count > local)


def skipped(skips: Sequence[tuple[int, int]], step: int) -> bool:
    return any(start <= step < end for start, end in skips)


class SkipSteps(Node):
    """State: ``{"source": ..., "taken": n}``: n items taken from ``source`` (skipped ones too).

    ``skips``: ``check_skips``'s ranges; ``per_batch``: items a batch holds (the DataLoader's batch_size;
    1 when each item is a batch, as with token budgets); ``batches``: each worker's batches this epoch;
    ``worker``: this one; ``first_step``: the global step of the epoch's first batch; ``counters``: where
    the samples dropped are counted (None: nowhere)."""

    state_keys = frozenset({"taken"})

    def __init__(
        self,
        source: Node,
        skips: Sequence[tuple[int, int]],
        *,
        per_batch: int,
        batches: Sequence[int],
        worker: int,
        first_step: int,
        counters: Any = None,
    ) -> None:
        super().__init__()
        self.source, self.skips, self.per_batch = source, tuple(skips), per_batch
        self.batches, self.worker, self.first_step, self.counters = (
            list(batches),
            worker,
            first_step,
            counters,
        )
        self.taken = 0

    def _current_state(self) -> dict[str, Any]:
        return {"source": self._source_state(), "taken": self.taken}

    def check_state(self, state: Any) -> None:
        state_keys_of(self, state, self.state_keys | {"source"})
        state_int(self, state, "taken")

    def _generate(self, state: dict[str, Any] | None) -> Iterator[Item]:
        self.source.reset(state["source"] if state else None)  # type: ignore[union-attr]
        self.taken = state["taken"] if state else 0
        local, dropping = -1, False
        for item in self.source:  # type: ignore[union-attr]
            batch = self.taken // self.per_batch
            self.taken += 1
            if batch != local:
                local = batch
                step = self.first_step + step_of(self.batches, self.worker, batch)
                dropping = skipped(self.skips, step)
            if dropping:
                if self.counters is not None:
                    self.counters.add("samples_skipped_steps", _samples(item))
                continue
            yield item


def _samples(item: Item) -> int:
    """Samples in an item: a budget's batch is a list, else one."""
    value = item[2]
    return len(value) if isinstance(value, list) else 1
