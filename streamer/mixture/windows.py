"""One source's samples for one worker, window by window: each window read in stream order, handed out
in its keyed shuffle order.

A window holds raw samples, never decoded ones: their ids where the samples are large (each is read as it
leaves, ``fetch.py``; ``defer_reads`` as in ShardDataset), else their bytes. With a window of one sample
(no shuffle, or a buffer smaller than the sources) there is no window: the run streams as it is read,
one generator step a sample. A source small enough to hold (at most ``HOLD_SAMPLES`` samples and
``HOLD_BYTES`` bytes of members, read as bytes) is kept in memory after its first whole pass and served
from there, instead of reopening its shards every pass (a 7-sample source in a large mixture was
reopened hundreds of times an epoch). Trade-off: up to ``HOLD_BYTES`` a small source, for no reopening.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..chain.deferred import DEFERRED, OPEN_SHARDS, DeferredReads, deferred_reads
from ..chain.node import Item
from ..chain.opener import ShardOpener
from ..chain.reader import SampleReader
from ..chain.recovery import Recovery
from .passes import PassStream, RunSegments

HOLD_SAMPLES = 4096  # a source of at most this many samples per pass ...
HOLD_BYTES = 1 << 20  # ... whose members take at most this many bytes is held after its first pass,
HOLD_TOTAL = 32 << 20  # ... while a worker's held sources take at most this many in all
Touch = Callable[["SourceWindows"], None]
Run = tuple[Any, int, int]  # a source's stream (PassStream or an elastic PlanStream) and [begin, end) of it


class Holding:
    """The bytes a worker's sources may still hold (``HOLD_TOTAL`` at first), shared by its sources."""

    def __init__(self, limit: int = HOLD_TOTAL) -> None:
        self.left = limit

    def take(self, nbytes: int) -> bool:
        if nbytes > self.left:
            return False
        self.left -= nbytes
        return True


class SourceWindows:
    """One source of one worker: samples [begin, end) of its pass stream, handed out window by window.

    ``name``: the source's, tagged on its samples; ``opener``: its ShardOpener (its fields); ``stream``:
    its pass stream (or an elastic restore's ``PlanStream``); ``run``: (begin, end) of it; ``window``:
    samples a window holds (1: none, the run streams); ``recovery``: what a loss costs; ``holding``: the
    worker's budget for holding small sources (None: never held); ``deferred``: the DeferredReads whose
    large samples a window holds as ids (None: bytes always).
    """

    def __init__(
        self,
        name: str,
        opener: ShardOpener,
        stream: PassStream,
        run: tuple[int, int],
        *,
        window: int,
        recovery: Recovery,
        holding: Holding | None = None,
        deferred: DeferredReads | None = None,
    ) -> None:
        self.name, self.opener, self.stream = name, opener, stream
        self.begin, self.end = run
        self.window = max(1, window)
        self.recovery = recovery
        self._reader: Iterator[Item] | None = None
        self._back: list[Item] = []  # samples read ahead of their window (after a loss)
        self._at = -1  # the stream position the open reader stands at
        self._position = self.begin  # where the next window handed out begins
        self.holding = holding
        self.deferred = deferred if self.window > 1 else None  # a stream of single samples holds nothing
        small = holding is not None and isinstance(stream, PassStream) and stream.size <= HOLD_SAMPLES
        self._filling: dict[tuple[int, int], dict[str, Any]] | None = {} if small else None
        self._filled = 0  # member bytes held so far
        self._held: dict[tuple[int, int], dict[str, Any]] | None = None  # the whole source, once read

    def seek(self, done: int) -> None:
        """The next window handed out starts at the run's ``done``-th sample (0-based, in window order)."""
        self.suspend()
        self._position = self.begin + done

    def next_window(self, touch: Touch) -> Iterator[Item | None]:
        """The rest of the window holding the next sample, in window order; None for a lost sample (the
        Recovery has counted it and owes a stand-in). ``touch`` is told when a reader is used."""
        position = self._position
        if self.window == 1:  # no window: stream the rest of the run as it is read
            self._position = self.end
            return self._stream(position, touch)
        lo, hi = self.stream.window(self.begin, self.end, self.window, position - self.begin)
        # Restored inside this window: its losses were counted, and owed, when it was first loaded.
        with self.recovery.replaying() if position > lo else contextlib.nullcontext():
            slots = self._load(lo, hi, touch)
            order = self.stream.window_order(lo, hi)
            self._position = hi
            return iter(self._tag([slots[k] for k in order[position - lo :]]))

    def suspend(self) -> None:
        """Close the reader (and its file or connection) and the shards kept open for deferred reads; the
        next window reopens where it stands, a deferred read its shard."""
        if self._reader is not None:
            self._reader.close()  # type: ignore[attr-defined]
            self._reader = None
        if self.deferred is not None:
            self.deferred.close()
        self._back = []

    def read_one(self, shard: int, index: int) -> Any:
        """Sample ``index`` of shard ``shard`` (one of this source's), as windows hand it out (stand-ins)."""
        sample = self.opener.read_one(shard, index)
        sample["__source__"] = self.name
        return sample

    def _tag(self, items: list[Item | None]) -> list[Item | None]:
        """Tag each sample read with its source (shard numbers are the mixture's already). Decoding comes
        later, one sample at a time as it is handed out (a ``Mapper`` after the reader), so a window holds
        raw bytes or ids only."""
        name = self.name
        for item in items:
            if item is not None and item[2] is not DEFERRED:  # an id: tagged when it is read (fetch.py)
                item[2]["__source__"] = name
        return items

    def _stream(self, position: int, touch: Touch) -> Iterator[Item | None]:
        """The run from ``position`` on, in stream order, as read; None where a sample was lost (the
        reader's Recovery counted it). A reader closed meanwhile (``suspend``) reopens where it stood."""
        name, ahead, reader = self.name, None, None  # ahead: read past a lost sample, for a later place
        for segment in self.stream.segments(position, self.end):
            shard, held = segment.shard, self._held
            if held is not None:
                for index in range(segment.start, segment.stop):
                    yield shard, index, {**held[shard, index], "__source__": name}
                position += segment.stop - segment.start
                continue
            for index in range(segment.start, segment.stop):
                if reader is None or reader is not self._reader:  # first, or closed for another source
                    reader, ahead = self._open(position, touch), None
                item = ahead if ahead is not None else next(reader, None)
                position += 1
                if item is not None and item[1] == index and item[0] == shard:
                    ahead = None
                    if self._filling is not None:
                        self._keep(item)
                    item[2]["__source__"] = name
                    yield item
                else:
                    ahead = item
                    self._give_up()  # a lossy source is read again each pass, its losses counted again
                    yield None

    def _open(self, position: int, touch: Touch) -> Iterator[Item]:
        """A reader of the run from stream position ``position`` on."""
        self.suspend()
        segments = RunSegments(self.stream, position, self.end)
        if self._filling is not None and self._defers(position):
            self._give_up()  # its samples are large: a window holds their ids, the source is not held
        deferred = self.deferred if self._filling is None else None  # a source being held is read whole
        self._reader = reader = iter(SampleReader(self.opener, segments, self.recovery, deferred=deferred))
        self._at = position
        touch(self)
        return reader

    def _defers(self, position: int) -> bool:
        """Whether the shard at stream position ``position`` is read by deferred reads."""
        if self.deferred is None:
            return False
        segment = next(iter(self.stream.segments(position, position + 1)), None)
        return segment is not None and self.deferred.offsets(segment.shard) is not None

    def _keep(self, item: Item) -> None:
        """Hold a small source's samples as they are read; the whole of it, once one pass is complete."""
        filling = self._filling
        if filling is None:
            return
        shard, index, sample = item
        nbytes = sum(len(v) for v in sample.values() if isinstance(v, (bytes, bytearray)))
        if self._filled + nbytes > HOLD_BYTES or not self.holding.take(nbytes):  # type: ignore[union-attr]
            self._give_up()  # too big to hold: read it as any other source
            if self.deferred is not None:
                self._at = -1  # the next window reopens, deferring its reads
            return
        self._filled += nbytes
        filling[shard, index] = dict(sample)
        if len(filling) == self.stream.size:
            self._held, self._filling = filling, None

    def _give_up(self) -> None:
        """Stop holding this source; what it held goes back to the worker's budget."""
        if self._filling is not None:
            self.holding.left += self._filled  # type: ignore[union-attr]
        self._filling, self._filled = None, 0

    def _load(self, lo: int, hi: int, touch: Touch) -> list[Item | None]:
        """Every sample of the window [lo, hi), in stream order; None where one was lost."""
        held = self._held
        if held is not None:  # the whole source is in memory: no reader, no reopening
            ids = [(s.shard, i) for s in self.stream.segments(lo, hi) for i in range(s.start, s.stop)]
            return [(shard, index, dict(held[shard, index])) for shard, index in ids]
        if self._reader is None or self._at != lo:  # not simply the window after the last one: reopen
            self._open(lo, touch)
        else:
            touch(self)
        self._at = hi
        size, back = hi - lo, self._back
        got = back[:size] + list(itertools.islice(self._reader, size - min(len(back), size)))
        del back[:size]
        stream = self.stream
        if len(got) == size and got[0][:2] == stream.at(lo) and got[-1][:2] == stream.at(hi - 1):
            if self._filling is not None:
                for item in got:
                    self._keep(item)
            return got  # type: ignore[return-value]  # the stream is in order: nothing was lost
        self._give_up()  # a source that lost a sample is read again each pass, its losses counted again
        return self._place(got, [(seg.shard, seg.start, seg.stop) for seg in stream.segments(lo, hi)])

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


def worker_windows(
    names: Sequence[str],
    openers: Sequence[ShardOpener],
    runs: Sequence[Run],
    sizes: Sequence[int],
    recovery: Recovery,
    defer_reads: bool | None,
) -> list[SourceWindows]:
    """One worker's windows of each source: run ``runs[j]`` in windows of ``sizes[j]`` samples, through
    ``openers[j]``; the sources share one ``Holding``, and each keeps a share of ``OPEN_SHARDS`` shards
    open for its deferred reads (at least 4), as ``defer_reads`` asks (by the size rule, as the first
    shard of its run says)."""
    holding, keep = Holding(), max(4, OPEN_SHARDS // len(names))
    windows = []
    for name, opener, (stream, begin, end), size in zip(names, openers, runs, sizes, strict=True):
        first = next(iter(stream.segments(begin, begin + 1)), None) if size > 1 and begin < end else None
        deferred = deferred_reads(opener, defer_reads, first and first.shard, keep=keep)
        windows.append(
            SourceWindows(
                name,
                opener,
                stream,
                (begin, end),
                window=size,
                recovery=recovery,
                holding=holding,
                deferred=deferred,
            )
        )
    return windows
