"""A worker's mixture stream: the planned interleave, each pick served from its source's current window.

Each source reads its run of its pass stream in order through its own opener, window by window (see
``passes.py``); the ``Interleave`` says which source the next sample comes from. The node's state is the
interleave's per-source counts, nothing else: a restore reopens each source at the window holding its
next sample. Readers are opened lazily and at most ``max_open`` at a time (least recently used closed),
so a thousand sources do not hold a thousand open files per worker.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import operator
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..chain.node import Item, Node
from ..chain.opener import ShardOpener
from ..chain.reader import SampleReader
from ..chain.recovery import Recovery
from .passes import PassStream, RunSegments
from .plan import Interleave
from .stratify import Stratified

_CHUNK = 1024  # sources picked at once: the interleave's loop runs without a generator hop per sample


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
    ) -> None:
        self.name, self.opener, self.stream = name, opener, stream
        self.begin, self.end = run
        self.window = max(1, window)
        self.recovery = recovery
        self._reader: Iterator[Item] | None = None
        self._back: list[Item] = []  # samples read ahead of their window (after a loss)
        self._at = -1  # the stream position the open reader stands at
        self._position = self.begin  # where the next window handed out begins

    def seek(self, done: int) -> None:
        """The next window handed out starts at the run's ``done``-th sample (0-based, in window order)."""
        self.suspend()
        self._position = self.begin + done

    def next_window(self, touch: Callable[[SourceWindows], None]) -> Iterator[Item | None]:
        """The rest of the window holding the next sample, in window order; None for a lost sample (the
        Recovery has counted it and owes a stand-in). ``touch`` is told when a reader is used."""
        position = self._position
        lo, hi = self.stream.window(self.begin, self.end, self.window, position - self.begin)
        # Restored inside this window: its losses were counted, and owed, when it was first loaded.
        with self.recovery.replaying() if position > lo else contextlib.nullcontext():
            slots = self._load(lo, hi, touch)
            order = self.stream.window_order(lo, hi)
            self._position = hi
            return iter(self._tag([slots[k] for k in order[position - lo :]]))

    def suspend(self) -> None:
        """Close the reader (and its file or connection); the next window reopens where it stands."""
        if self._reader is not None:
            self._reader.close()  # type: ignore[attr-defined]
            self._reader = None
        self._back = []

    def read_one(self, shard: int, index: int) -> Any:
        """Sample ``index`` of shard ``shard`` (one of this source's), as windows hand it out (stand-ins)."""
        sample = self.opener.read_one(shard, index)
        sample["__source__"] = self.name
        return sample

    def _tag(self, items: list[Item | None]) -> list[Item | None]:
        """Tag each sample with its source (ids are the mixture's already). Decoding comes later, one sample
        at a time as it is handed out (a ``Mapper`` after the reader), so a window holds raw bytes only."""
        name = self.name
        for item in items:
            if item is not None:
                item[2]["__source__"] = name
        return items

    def _load(self, lo: int, hi: int, touch: Callable[[SourceWindows], None]) -> list[Item | None]:
        """Every sample of the window [lo, hi), in stream order; None where one was lost."""
        if self._reader is None or self._at != lo:  # not simply the window after the last one: reopen
            self.suspend()
            segments = RunSegments(self.stream, lo, self.end)
            self._reader = iter(SampleReader(self.opener, segments, self.recovery))
        touch(self)
        self._at = hi
        expected = [(seg.shard, seg.start, seg.stop) for seg in self.stream.segments(lo, hi)]
        size, back = hi - lo, self._back
        got = back[:size] + list(itertools.islice(self._reader, size - min(len(back), size)))
        del back[:size]
        first, last = expected[0], expected[-1]
        if len(got) == size and got[0][:2] == first[:2] and got[-1][:2] == (last[0], last[2] - 1):
            return got  # type: ignore[return-value]  # the stream is in order: nothing was lost
        return self._place(got, expected)

    def _place(self, got: list[Item], expected: list[tuple[int, int, int]]) -> list[Item | None]:
        """The slow path, after a loss: each sample to its slot; later windows' samples kept for them.

        ``got`` holds as many samples as the window has places, so after a loss it runs into the next
        window (or the reader has ended): no sample of this window can come after it."""
        slot_of = {}
        for shard, start, stop in expected:
            for index in range(start, stop):
                slot_of[(shard, index)] = len(slot_of)
        slots: list[Item | None] = [None] * len(slot_of)
        for k, item in enumerate(got):
            slot = slot_of.get((item[0], item[1]))
            if slot is None:  # past this window: everything from here on belongs to later windows
                self._back = got[k:] + self._back
                break
            slots[slot] = item
        return slots


class MixtureReader(Node):
    """State: ``{"counts": [...]}`` — samples handed out so far of each source, in the plan's order (and,
    stratified, ``"batch_start"``: the counts when the current batch began)."""

    state_keys = frozenset({"counts"})

    def __init__(
        self,
        sources: Sequence[SourceWindows],
        budgets: Sequence[int],
        bases: Sequence[int],
        *,
        max_open: int = 32,
        stratify: int | None = None,
    ) -> None:
        super().__init__()
        self.sources = list(sources)
        self.budgets = tuple(budgets)
        self.max_open = max_open
        self.stratify = stratify
        self._bases = list(bases)  # where each source's shards begin in the mixture's shard list
        self._open: OrderedDict[int, SourceWindows] = OrderedDict()
        self._order = self._make_order(None)
        self._chunk: list[int] = []  # the picks being handed out, and an iterator over them
        self._picks: Iterator[int] = iter(())

    def _make_order(self, state: dict[str, Any] | None) -> Interleave | Stratified:
        counts = state["counts"] if state else None
        if self.stratify is not None:
            return Stratified(
                self.budgets, self.stratify, counts, state.get("batch_start") if state else None
            )
        return Interleave(self.budgets, counts)

    def _current_state(self) -> dict[str, Any]:
        state = self._order.state()
        left = operator.length_hint(self._picks)  # picked ahead in the last chunk, not yet handed out
        for j in self._chunk[len(self._chunk) - left :]:
            state["counts"][j] -= 1
        return state

    def read_one(self, shard: int, index: int) -> Any:
        return self.sources[bisect.bisect_right(self._bases, shard) - 1].read_one(shard, index)

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
                        windows[j] = window = sources[j].next_window(self._touch)
                        item = next(window)
                    if item is not None:
                        yield item
        finally:
            self._close()

    def _close(self) -> None:
        for source in self._open.values():
            source.suspend()
        self._open.clear()
