"""Coalesced deferred reads of remote shards: one ranged GET per span of wanted samples, held till they leave.

Behind a shuffle buffer the buffer holds a remote shard's sample ids; what it knows is which ids are wanted:
those that entered and have not left, and those of its segment still to enter. The spans past the shard's
frontier are read ahead, ``ahead`` GETs of up to ``span`` bytes in flight, as soon as a segment's ids are
known; a sample that leaves before its span arrives waits for that span, and one that no span covered (a
restored buffer's, one whose span failed) is read with the wanted samples around it: back to the lowest
within half a span, forward to the last within the span. Each wanted sample's bytes are kept, one copy
each, until it leaves. Trade-off: memory for requests. Held and in-flight bytes stay under ``budget``,
so spans shrink when they near it (at the least, a sample is read alone): a buffer whose samples hold
more than the budget makes many more GETs. Rather than a window of whole shards read ahead, which would
hold bytes whatever the buffer wants, this holds only wanted samples. Measured on the shaped server
(30 ms first byte, 100 MB/s per connection; ``benchmarks/results/objstore-deferred-2026-12-05.md``),
100,000 samples of 1-4 KB, buffer 1,000: one GET per sample reads 32 samples/s; 4 MiB spans with 8
ahead 0.001 GETs per sample, the fastest of the settings tried (spans of 1, 8 and 32 MiB; 2-16 ahead).
"""

from __future__ import annotations

import bisect
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from shardstream.errors import redact_url
from shardstream.format.constants import BLOCK
from shardstream.io.objstore import read_object_range
from shardstream.io.objstoreoptions import native
from shardstream.io.openers import OpenOptions, is_compressed, read_range
from shardstream.io.urls import scheme_of

SPAN = 4 << 20  # the most bytes one ranged GET asks for
BUDGET = 32 << 20  # the most bytes held or in flight for samples not yet handed out, per reader
AHEAD = 8  # spans read ahead at once, at most (each a connection)
REMOTE = ("s3", "gs", "az", "http", "https")  # schemes whose shards are read by coalesced ranged GETs
# One byte per sample of an open shard: wanted and not read, read and held, or neither.
WANTED, HELD, IDLE = 0, 1, 2


def coalescable(url: str, options: OpenOptions) -> bool:
    """Whether a shard at ``url`` can be read by spans: a remote, uncompressed, uncached object."""
    return scheme_of(url) in REMOTE and not is_compressed(url) and options.cache_dir is None


class RemoteShard:
    """One remote shard's offsets sidecar, its size as indexed (None: unknown), each sample's state, the
    bytes held for its samples (from the sample's first header to the next one's, included) and the
    ``frontier``: the sample where the spans read ahead of it have reached."""

    __slots__ = ("frontier", "held", "offsets", "size", "state", "url")

    def __init__(self, url: str, offsets: Any, size: int | None) -> None:
        self.url = redact_url(url)  # as every sample and error shows it
        self.offsets, self.size = offsets, size
        self.state = bytearray([IDLE]) * (len(offsets) - 1)
        self.held: dict[int, bytes] = {}
        self.frontier = 0


def _held(entry: RemoteShard, first: int, end: int) -> int:
    """The bytes samples ``first``..``end`` take once held: each with the next sample's header."""
    offsets = entry.offsets
    return int(offsets[end]) - int(offsets[first]) + BLOCK * (end - first)


class _Span:
    """A span read in the background: samples ``first``..``end`` of ``entry``, bytes ``start``..``stop``."""

    __slots__ = ("end", "entry", "first", "future", "start", "stop")

    def __init__(self, entry: RemoteShard, first: int, end: int, start: int, stop: int, future: Any) -> None:
        self.entry, self.first, self.end = entry, first, end
        self.start, self.stop, self.future = start, stop, future


class CoalescedReads:
    """Reads remote shards' samples by spans of wanted samples, the next spans read ahead in threads.

    ``options``: how shards are reached; ``span``: the most bytes one GET asks for (default ``SPAN``,
    4 MiB); ``budget``: the most bytes held or in flight at once for samples not yet handed out, each
    counted with the next sample's header (default ``BUDGET``, 32 MiB; make it exceed ``buffer_size`` x
    the mean sample's bytes + 2 x ``span``, or spans shrink); ``ahead``: spans read ahead at once
    (default ``AHEAD``, 8; 0: none, each span read when a sample of it leaves). ``requests`` counts the
    GETs asked for."""

    def __init__(
        self, options: OpenOptions, *, span: int = SPAN, budget: int = BUDGET, ahead: int = AHEAD
    ) -> None:
        if span < 1:
            raise ValueError(f"span must be >= 1 byte, not {span}")
        if budget < 0:
            raise ValueError(f"budget must be >= 0 bytes, not {budget}")
        if ahead < 0:
            raise ValueError(f"ahead must be >= 0 spans, not {ahead}")
        self.options, self.span, self.budget, self.ahead = options, span, budget, ahead
        self.held_bytes = 0
        self.requests = 0
        self._flying: list[_Span] = []
        self._pool: ThreadPoolExecutor | None = None

    def want(self, entry: RemoteShard, first: int, end: int, url: str | None = None) -> None:
        """Samples ``first``..``end`` of the shard will leave the buffer (they entered it or are to);
        with ``url``, the first of their spans are asked for now."""
        state = entry.state
        state[first:end] = state[first:end].replace(bytes([IDLE]), bytes([WANTED]))
        if url is not None:
            self._read_ahead(url, entry)

    def take(self, url: str, entry: RemoteShard, index: int) -> bytes:
        """Sample ``index``'s bytes with the next sample's header (fewer where the object ends first), from
        those held, a span on its way, or one read now with its neighbours; the caller checks them.
        ShardReadError naming the URL and offset when the read fails (after the store's retries): the
        policy's to decide, for this sample alone (the others of its span are read again)."""
        entry.state[index] = IDLE  # handed out now, or lost to the policy: held no longer either way
        data = entry.held.pop(index, None)
        if data is not None:
            self.held_bytes -= len(data)
            if len(self._flying) < self.ahead:  # the budget this frees may make room for another span
                self._read_ahead(url, entry)
            return data
        for span in self._flying:
            if span.entry is entry and span.first <= index < span.end:
                self._flying.remove(span)
                data = span.future.result()
                self._keep(entry, span.first, span.end, span.start, data)
                self._read_ahead(url, entry)
                return self._piece(entry, index, span.start, data)
        return self._read_span(url, entry, index)

    @property
    def taken(self) -> int:
        """The bytes held and on their way (the spans in flight, as they will be held): the budget's."""
        return self.held_bytes + sum(_held(span.entry, span.first, span.end) for span in self._flying)

    def _reach(self) -> int:
        """The bytes the next GET may ask for: at most ``span``, within what the budget leaves."""
        return max(0, min(self.span, self.budget - self.taken))

    def _read_span(self, url: str, entry: RemoteShard, index: int) -> bytes:
        offsets, state = entry.offsets, entry.state
        reach = self._reach()
        # Back to the lowest wanted id within half the reach (the buffer's older ids), then forward, up to
        # the spans already on their way.
        floor = bisect.bisect_left(offsets, int(offsets[index + 1]) - reach // 2, 0, index)
        lowest = state.find(WANTED, floor, index)
        first = lowest if lowest >= 0 else index
        end = self._span_end(entry, first, index + 1, reach)
        for span in self._flying:
            if span.entry is entry and index < span.first < end:
                end = span.first
        start, stop = self._bytes(entry, first, end)
        data = self._get(url, start, stop)
        self.requests += 1
        self._keep(entry, first, end, start, data)
        entry.frontier = max(entry.frontier, end)
        self._read_ahead(url, entry)
        return self._piece(entry, index, start, data)

    def _read_ahead(self, url: str, entry: RemoteShard) -> None:
        """Ask, in the background, for the spans of wanted samples past the shard's frontier, while the
        buffer hands out those read: up to ``ahead`` spans in flight, within the budget."""
        while len(self._flying) < self.ahead:
            first = entry.state.find(WANTED, entry.frontier)
            reach = self._reach()
            # A span cut short by the budget waits for room while others are on their way: many small
            # GETs would take the place of a few full ones.
            if first < 0 or _held(entry, first, first + 1) > reach or (reach < self.span and self._flying):
                return
            end = self._span_end(entry, first, first + 1, reach)
            start, stop = self._bytes(entry, first, end)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.ahead, thread_name_prefix="shardstream-span")
            future = self._pool.submit(self._get, url, start, stop)
            self._flying.append(_Span(entry, first, end, start, stop, future))
            entry.frontier = end
            self.requests += 1

    def _span_end(self, entry: RemoteShard, first: int, least: int, reach: int) -> int:
        """Past the last wanted sample whose bytes from sample ``first`` on, as held, fit in ``reach``
        (at least ``least``)."""
        offsets, count = entry.offsets, len(entry.state)
        cost = int(offsets[first]) + BLOCK * first + reach
        # offsets[e] + BLOCK x e grows with e: a bisection over it finds the samples that fit.
        top = bisect.bisect_right(
            range(count + 1), cost, least, count + 1, key=lambda e: int(offsets[e]) + BLOCK * e
        )
        last = entry.state.rfind(WANTED, least, max(top - 1, least))
        return last + 1 if last >= 0 else least

    def _bytes(self, entry: RemoteShard, first: int, end: int) -> tuple[int, int]:
        """Samples ``first``..``end``'s bytes with the next sample's header, within the object's size."""
        start = int(entry.offsets[first])
        stop = int(entry.offsets[end]) + (BLOCK if end < len(entry.state) else 0)
        if entry.size is not None:
            stop = min(stop, entry.size)  # a stale sidecar may point past the object: the caller reports it
        return start, stop

    @staticmethod
    def _piece(entry: RemoteShard, index: int, start: int, data: bytes) -> bytes:
        """Sample ``index``'s bytes and the next header, out of ``data`` (the shard's from ``start``)."""
        offsets = entry.offsets
        return data[int(offsets[index]) - start : int(offsets[index + 1]) - start + BLOCK]

    def _keep(self, entry: RemoteShard, first: int, end: int, start: int, data: bytes) -> None:
        """Hold a copy of each still-wanted sample's bytes of ``data`` (samples ``first``..``end``)."""
        state = entry.state
        for i in range(first, end):
            if state[i] == WANTED:
                piece = self._piece(entry, i, start, data)
                entry.held[i] = piece
                state[i] = HELD
                self.held_bytes += len(piece)

    def _get(self, url: str, start: int, stop: int) -> bytes:
        """One ranged GET: obstore's where it reads this scheme in this process (fewer bytes where the
        object ends first), else the general path's (fsspec, HTTP), where a short object is an error."""
        if native(scheme_of(url)):
            return read_object_range(url, start, stop, self.options.object_store)
        return read_range(url, start, stop, self.options)

    def release(self, entry: RemoteShard) -> None:
        """Forget what is held or on its way for ``entry`` (closed, or a pass abandoned)."""
        self.held_bytes -= sum(len(data) for data in entry.held.values())
        entry.held.clear()
        for span in [span for span in self._flying if span.entry is entry]:
            span.future.cancel()  # one already running finishes in its thread and is dropped
            self._flying.remove(span)
        entry.frontier = 0

    def close(self) -> None:
        """Stop the read-ahead's threads (a GET in flight finishes there and is dropped)."""
        for span in self._flying:
            span.future.cancel()
        self._flying.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
