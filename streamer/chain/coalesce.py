"""Coalesced deferred reads of remote shards: one ranged GET per span of wanted samples, held till they leave.

Behind a shuffle buffer the buffer holds a remote shard's sample ids; what it knows is which ids are wanted:
those that entered and have not left, and those of the segment still to enter. When a sample leaves and
its bytes are not held, one ranged GET reads it together with the wanted samples around it: back to the
lowest wanted id within half a ``span``, forward to the last wanted id within the span. Their bytes are
kept, one copy per sample, until each leaves in turn. Trade-off: memory for requests. The bytes held stay
under ``budget``, so a span shrinks when they near it (at the least, one sample is read alone); a buffer
whose samples hold more than the budget makes a GET for many of them. Chosen by measurement on the shaped
server (30 ms first byte, 100 MB/s per connection, ``benchmarks/objstore/deferred_bench.py``): one GET
per sample made 0.03 samples/ms; spans of 8 MiB made < 0.01 requests per sample at the connection's rate,
where a window of whole shards read ahead would hold their bytes whatever the buffer wants.
"""

from __future__ import annotations

import bisect
from typing import Any

from shardstream.errors import redact_url
from shardstream.format.constants import BLOCK
from shardstream.io.objstore import read_object_range
from shardstream.io.objstoreoptions import native
from shardstream.io.openers import OpenOptions, is_compressed, read_range
from shardstream.io.urls import scheme_of

SPAN = 8 << 20  # the most bytes one ranged GET asks for
BUDGET = 32 << 20  # the most tar bytes held for samples read and not yet handed out, per reader
REMOTE = ("s3", "gs", "az", "http", "https")  # schemes whose shards are read by coalesced ranged GETs
# One byte per sample of an open shard: wanted and not read, read and held, or neither.
WANTED, HELD, IDLE = 0, 1, 2


def coalescable(url: str, options: OpenOptions) -> bool:
    """Whether a shard at ``url`` can be read by spans: a remote, uncompressed, uncached object."""
    return scheme_of(url) in REMOTE and not is_compressed(url) and options.cache_dir is None


class RemoteShard:
    """One remote shard's offsets sidecar, its size as indexed (None: unknown), each sample's state and the
    bytes held for its samples (from the sample's first header to the next one's, included)."""

    __slots__ = ("held", "offsets", "size", "state", "url")

    def __init__(self, url: str, offsets: Any, size: int | None) -> None:
        self.url = redact_url(url)  # as every sample and error shows it
        self.offsets, self.size = offsets, size
        self.state = bytearray([IDLE]) * (len(offsets) - 1)
        self.held: dict[int, bytes] = {}


class CoalescedReads:
    """Reads remote shards' samples by spans of wanted samples. ``options``: how shards are reached;
    ``span``: the most bytes one GET asks for (default ``SPAN``, 8 MiB); ``budget``: the most tar bytes
    held at once for samples read ahead of handing them out (default ``BUDGET``, 32 MiB; make it exceed
    ``buffer_size`` x the mean sample's bytes + ``span``, or spans shrink). ``requests`` counts the GETs."""

    def __init__(self, options: OpenOptions, *, span: int = SPAN, budget: int = BUDGET) -> None:
        if span < 1:
            raise ValueError(f"span must be >= 1 byte, not {span}")
        if budget < 0:
            raise ValueError(f"budget must be >= 0 bytes, not {budget}")
        self.options, self.span, self.budget = options, span, budget
        self.held_bytes = 0
        self.requests = 0

    def want(self, entry: RemoteShard, first: int, end: int) -> None:
        """Samples ``first``..``end`` of the shard will leave the buffer (they entered it or are to)."""
        state = entry.state
        state[first:end] = state[first:end].replace(bytes([IDLE]), bytes([WANTED]))

    def take(self, url: str, entry: RemoteShard, index: int) -> bytes:
        """Sample ``index``'s bytes with the next sample's header (fewer where the object ends first), from
        those held or read now with its neighbours; the caller checks them. ShardReadError naming the URL
        and offset when the read fails (after the store's retries): the policy's to decide."""
        data = entry.held.pop(index, None)
        entry.state[index] = IDLE
        if data is not None:
            self.held_bytes -= len(data)
            return data
        return self._read_span(url, entry, index)

    def _read_span(self, url: str, entry: RemoteShard, index: int) -> bytes:
        offsets, state = entry.offsets, entry.state
        count = len(state)
        reach = max(0, min(self.span, self.budget - self.held_bytes))
        # Back to the lowest wanted id within half the reach (the buffer's older ids), then forward.
        floor = bisect.bisect_left(offsets, int(offsets[index + 1]) - reach // 2, 0, index)
        lowest = state.find(WANTED, floor, index)
        first = lowest if lowest >= 0 else index
        top = bisect.bisect_right(offsets, int(offsets[first]) + reach, index + 1, count + 1) - 1
        last = state.rfind(WANTED, index + 1, max(top, index + 1))
        end = last + 1 if last >= 0 else index + 1
        start, stop = int(offsets[first]), int(offsets[end]) + (BLOCK if end < count else 0)
        if entry.size is not None:
            stop = min(stop, entry.size)  # a stale sidecar may point past the object: the caller reports it
        data = self._get(url, start, stop)
        self.requests += 1
        for i in range(first, end):
            if i != index and state[i] == WANTED:
                piece = data[int(offsets[i]) - start : int(offsets[i + 1]) - start + BLOCK]
                entry.held[i] = piece
                state[i] = HELD
                self.held_bytes += len(piece)
        return data[int(offsets[index]) - start : int(offsets[index + 1]) - start + BLOCK]

    def _get(self, url: str, start: int, stop: int) -> bytes:
        """One ranged GET: obstore's where it reads this scheme in this process (fewer bytes where the
        object ends first), else the general path's (fsspec, HTTP), where a short object is an error."""
        if native(scheme_of(url)):
            return read_object_range(url, start, stop, self.options.object_store)
        return read_range(url, start, stop, self.options)

    def release(self, entry: RemoteShard) -> None:
        """Forget what is held for ``entry`` (closed, or a pass abandoned)."""
        self.held_bytes -= sum(len(data) for data in entry.held.values())
        entry.held.clear()
