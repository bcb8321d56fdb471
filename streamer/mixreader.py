"""A worker's mixture stream: the planned interleave, each pick served from its source's current window.

Each source reads its run of its pass stream in order through its own opener, window by window (see
``passes.py``); the ``Interleave`` says which source the next sample comes from. The node's state is the
interleave's per-source counts, nothing else: a restore reopens each source at the window holding its
next sample. Readers are opened lazily and at most ``max_open`` at a time (least recently used closed),
so a thousand sources do not hold a thousand open files per worker.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from shardstream.errors import StreamError

from .mixplan import Interleave
from .nodes import Item, Node
from .passes import PassStream, RunSegments
from .reader import SampleReader
from .recovery import Recovery
from .shardopener import ShardOpener
from .stratify import Stratified

Decode = Callable[[dict[str, Any]], Any]


class SourceWindows:
    """One source of one worker: samples [begin, end) of its pass stream, handed out window by window."""

    def __init__(
        self,
        name: str,
        opener: ShardOpener,
        stream: PassStream,
        run: tuple[int, int],
        *,
        window: int,
        recovery: Recovery,
        decode: Decode | None,
        shard_base: int,
    ) -> None:
        self.name, self.opener, self.stream = name, opener, stream
        self.begin, self.end = run
        self.window = max(1, window)
        self.recovery, self.decode, self.shard_base = recovery, decode, shard_base
        self._reader: Iterator[Item] | None = None
        self._peeked: Item | None = None
        self.seek(0)

    def seek(self, done: int) -> None:
        """The next sample handed out will be the ``done``-th of the run (0-based), in window order."""
        self.suspend()
        self._done = self.begin + done  # stream position of the next sample
        self._lo = self._hi = -1  # no window loaded: the next take loads the one holding it
        self._slots: list[Item | None] = []
        self._order: list[int] = []

    def suspend(self) -> None:
        """Close the reader (and its file or connection); the next window reopens where it stands."""
        if self._reader is not None:
            self._reader.close()  # type: ignore[attr-defined]
            self._reader = None
        self._peeked = None

    def take(self, touch: Callable[[SourceWindows], None]) -> Item | None:
        """The next sample, or None when it was lost (the Recovery has counted it and owes a stand-in)."""
        if self._done >= self._hi:
            self._load(touch)
        slot = self._order[self._done - self._lo]
        self._done += 1
        item, self._slots[slot] = self._slots[slot], None
        if item is None:
            return None
        return self._finish(item)

    def read_one(self, shard: int, index: int) -> Any:
        """Sample ``index`` of this source's shard ``shard``, as ``take`` hands it out (for stand-ins)."""
        item = self._finish((shard, index, self.opener.read_one(shard, index)), raising=True)
        return item[2]  # type: ignore[index]

    def _finish(self, item: Item, raising: bool = False) -> Item | None:
        shard, index, sample = item
        sample["__source__"] = self.name
        if self.decode is not None:
            try:
                sample = self.decode(sample)
            except StreamError as exc:
                if raising:
                    raise
                self.recovery.after_sample_error(exc, self.shard_base + shard, index)
                return None
        return self.shard_base + shard, index, sample

    def _load(self, touch: Callable[[SourceWindows], None]) -> None:
        """Read the window holding the next sample: every sample of it, in stream order, into its slot."""
        lo, hi = self.stream.window(self.begin, self.end, self.window, self._done - self.begin)
        where: dict[tuple[int, int], int] = {}
        for segment in self.stream.segments(lo, hi):
            for index in range(segment.start, segment.stop):  # type: ignore[arg-type]
                where[(segment.shard, index)] = len(where)
        if self._reader is None or self._hi != lo:  # not simply the window after the last one: reopen
            self.suspend()
            self._reader = iter(
                SampleReader(self.opener, RunSegments(self.stream, lo, self.end), self.recovery)
            )
        touch(self)
        reader, slots, last = self._reader, [None] * (hi - lo), hi - lo - 1
        while True:
            item = self._peeked if self._peeked is not None else next(reader, None)
            self._peeked = None
            if item is None:
                break
            slot = where.get((item[0], item[1]))
            if slot is None:  # the next window's first sample (this window's last ones were lost)
                self._peeked = item
                break
            slots[slot] = item
            if slot == last:
                break
        self._slots: list[Item | None] = slots
        self._order = self.stream.window_order(lo, hi).array().tolist()
        self._lo, self._hi = lo, hi


class MixtureReader(Node):
    """State: ``{"counts": [...]}`` — samples handed out so far of each source, in the plan's order (and,
    stratified, ``"batch_start"``: the counts when the current batch began)."""

    def __init__(
        self,
        sources: Sequence[SourceWindows],
        budgets: Sequence[int],
        *,
        max_open: int = 32,
        stratify: int | None = None,
    ) -> None:
        super().__init__()
        self.sources = list(sources)
        self.budgets = tuple(budgets)
        self.max_open = max_open
        self.stratify = stratify
        self._bases = [s.shard_base for s in self.sources]
        self._open: OrderedDict[int, SourceWindows] = OrderedDict()
        self._order = self._make_order(None)

    def _make_order(self, state: dict[str, Any] | None) -> Interleave | Stratified:
        counts = state["counts"] if state else None
        if self.stratify is not None:
            return Stratified(
                self.budgets, self.stratify, counts, state.get("batch_start") if state else None
            )
        return Interleave(self.budgets, counts)

    def _current_state(self) -> dict[str, Any]:
        return self._order.state()

    def read_one(self, shard: int, index: int) -> Any:
        source = self.sources[bisect.bisect_right(self._bases, shard) - 1]
        return source.read_one(shard - source.shard_base, index)

    def _touch(self, source: SourceWindows) -> None:
        key = id(source)
        self._open[key] = source
        self._open.move_to_end(key)
        while len(self._open) > self.max_open:
            _, oldest = self._open.popitem(last=False)
            oldest.suspend()

    def _generate(self, state: dict[str, Any] | None) -> Iterator[Item]:
        self._order = order = self._make_order(state)
        self._close()
        for source, done in zip(self.sources, order.counts, strict=True):
            source.seek(done)
        sources, touch = self.sources, self._touch
        try:
            for j in order:
                item = sources[j].take(touch)
                if item is not None:
                    yield item
        finally:
            self._close()

    def _close(self) -> None:
        for source in self._open.values():
            source.suspend()
        self._open.clear()
