"""A worker's mixture stream: the planned interleave, each pick served from its source's current window.

Each source reads its run of its pass stream in order through its own opener, window by window (see
``passes.py``); the ``Interleave`` says which source the next sample comes from. The node's state is the
interleave's per-source counts, nothing else: a restore reopens each source at the window holding its
next sample. Readers are opened lazily and at most ``max_open`` at a time (least recently used closed),
so a thousand sources do not hold a thousand open files per worker.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

from ..chain.node import Item, Node, is_int, state_keys_of
from .plan import Interleave
from .schedule import Pieces, ScheduledOrder
from .source import source_of
from .stratify import Stratified
from .windows import SourceWindows

_CHUNK = 1024  # sources picked at once: the interleave's loop runs without a generator hop per sample


class MixtureReader(Node):
    """State: ``{"counts": [...]}`` — samples handed out so far of each source, in the plan's order (and,
    stratified, ``"batch_start"``: the counts when the current batch began). ``shares``: a weight
    schedule's running shares for this worker (``schedule.py``; None: the constant weights' interleave)."""

    state_keys = frozenset({"counts"})

    def __init__(
        self,
        sources: Sequence[SourceWindows],
        budgets: Sequence[int],
        bases: Sequence[int],
        *,
        max_open: int = 32,
        stratify: int | None = None,
        shares: Pieces | None = None,
    ) -> None:
        super().__init__()
        self.sources = list(sources)
        self.budgets = tuple(budgets)
        self.max_open = max_open
        self.stratify = stratify
        self.shares = shares  # a schedule's running shares (None: constant weights)
        self._bases = list(bases)  # where each source's shards begin in the mixture's shard list
        self._open: OrderedDict[int, SourceWindows] = OrderedDict()
        self._order = self._make_order(None)
        self._chunk: list[int] = []  # the picks being handed out, and an iterator over them
        self._picks: Iterator[int] = iter(())

    def _make_order(self, state: dict[str, Any] | None) -> Interleave | Stratified | ScheduledOrder:
        counts = state["counts"] if state else None
        if self.shares is not None:
            return ScheduledOrder(self.shares, self.budgets, counts)
        if self.stratify is not None:
            return Stratified(
                self.budgets, self.stratify, counts, state.get("batch_start") if state else None
            )
        return Interleave(self.budgets, counts)

    def check_state(self, state: Any) -> None:
        """``counts`` (and, stratified, ``batch_start``): one int per source, within its budget and
        consistent with the order; ValueError naming the key."""
        state_keys_of(self, state, self.state_keys)
        keys = (
            ("counts", "batch_start") if self.stratify is not None and "batch_start" in state else ("counts",)
        )
        for key in keys:
            value = state[key]
            if not (isinstance(value, (list, tuple)) and len(value) == len(self.budgets)):
                raise ValueError(
                    f"the saved MixtureReader state has {key}={value!r:.60}; one count per source"
                    f" ({len(self.budgets)}), no more"
                )
            if not all(is_int(c) for c in value):
                raise ValueError(f"the saved MixtureReader state has {key}={value!r:.60}; counts are ints")
        try:
            self._make_order(state)  # the order's own check: each count within its budget
        except ValueError as exc:
            raise ValueError(f"the saved MixtureReader state does not fit this plan: {exc}") from None

    def _current_state(self) -> dict[str, Any]:
        state = self._order.state()
        left = operator.length_hint(self._picks)  # picked ahead in the last chunk, not yet handed out
        for j in self._chunk[len(self._chunk) - left :]:
            state["counts"][j] -= 1
        return state

    def read_one(self, shard: int, index: int) -> Any:
        return self.sources[source_of(self._bases, shard)].read_one(shard, index)

    def source_counts(self) -> list[int]:
        """Samples each source has handed out this epoch (to within the chunk picked ahead): for the
        statistics, read from another thread; a copy."""
        return list(self._order.counts)

    def touch(self, source: SourceWindows) -> None:
        """``source`` is in use: it keeps its reader open, and the least recently used beyond ``max_open``
        close theirs."""
        key = id(source)
        self._open[key] = source
        self._open.move_to_end(key)
        while len(self._open) > self.max_open:
            _, oldest = self._open.popitem(last=False)
            oldest.suspend()

    def _generate(self, state: dict[str, Any] | None) -> Iterator[Item]:
        self._order = order = self._make_order(state)
        self._close()
        sources = self.sources
        windows: list[Iterator[Item | None]] = [iter(()) for _ in sources]
        for source, done in zip(sources, order.counts, strict=True):
            source.seek(done)
        try:
            while chunk := order.fill(_CHUNK):
                self._chunk = chunk
                self._picks = picks = iter(chunk)
                for j in picks:  # per sample: a list iterator's step, one next(), one comparison
                    try:
                        item = next(windows[j])
                    except StopIteration:  # this source's window is used up: the next one
                        windows[j] = window = sources[j].next_window(self.touch)
                        item = next(window)
                    if item is not None:
                        yield item
        finally:
            self._close()

    def _close(self) -> None:
        for source in self._open.values():
            source.suspend()
        self._open.clear()
