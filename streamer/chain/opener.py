"""Opening a shard at a sample: its offsets sidecar, then one seek or Range request, read ahead or not.

With the sidecar a reader starts at any sample with one seek; without it (no sidecar, a pipe, a
compressed shard) the samples before are read and dropped. Read-ahead opens the next shards in a
background thread while one is consumed. Members not in ``fields`` are dropped here, before buffering.
With ``zero_copy`` a plain local (or cached) shard is mapped and its members are memoryviews into it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from shardstream.errors import ShardReadError
from shardstream.format import decode_offsets, iter_samples
from shardstream.format.window import MappedWindow
from shardstream.io.openers import OpenOptions, open_stream, read_small, seekable

from ..placement.segments import Segment, Segments
from ..placement.shards import ShardList
from .prefetch import Prefetcher, ReadAhead

Samples = Iterator[dict[str, Any]]


class ShardOpener:
    """Opens shards of ``shards`` at any sample; keeps the last shard's offsets; owns the read-ahead."""

    def __init__(
        self,
        shards: ShardList,
        options: OpenOptions | None = None,
        *,
        fields: tuple[str, ...] | None = None,
        prefetch: int = 0,
        prefetch_bytes: int = 16 << 20,
        zero_copy: bool = False,
    ) -> None:
        self.shards = shards
        self.zero_copy = zero_copy
        self.options = options or OpenOptions()
        self.keep = frozenset(fields) if fields else None
        self.prefetch = prefetch
        self.prefetch_bytes = prefetch_bytes
        self._prefetcher: Prefetcher | None = None
        self._offsets_cache: tuple[int, Any] | None = None

    # -- offsets ---------------------------------------------------------------------------------------
    def offsets(self, shard: int) -> Any:
        """The shard's sample offsets (array of n+1) or None when it has no sidecar or cannot seek."""
        if self._offsets_cache is not None and self._offsets_cache[0] == shard:
            return self._offsets_cache[1]
        values = self.load_offsets(shard)
        self._offsets_cache = (shard, values)
        return values

    def sample_offset(self, shard: int, index: int) -> int | None:
        """Byte offset of a sample's first header, when the sidecar is there."""
        offsets = self.offsets(shard)
        return int(offsets[index]) if offsets is not None and index < len(offsets) else None

    def load_offsets(self, shard: int) -> Any:
        """Thread-safe: touches no opener state (the read-ahead thread calls it too)."""
        if not seekable(self.shards.urls[shard]):
            return None
        url = self.shards.offsets_url(shard)
        data = read_small(url, self.options)
        if data is None:
            return None
        expected = int(self.shards.counts[shard]) if self.shards.counts is not None else None
        return decode_offsets(data, source=url, samples=expected)

    # -- opening ---------------------------------------------------------------------------------------
    def _open(self, shard: int, first: int, offsets: Any) -> BinaryIO:
        start_byte = int(offsets[first]) if offsets is not None and first < len(offsets) else 0
        url, digest = self.shards.urls[shard], self.shards.sha256(shard)
        return open_stream(url, start_byte, self.options, sha256=digest)

    def samples(self, shard: int, first: int, ready: ReadAhead | None = None) -> tuple[Samples, BinaryIO]:
        """Samples of a shard from index ``first``, and the stream to close after them."""
        if ready is not None:
            offsets = ready.wait_opened()
            self._offsets_cache = (shard, offsets)
            stream: BinaryIO = ready  # type: ignore[assignment]
        else:
            offsets = self.offsets(shard)
            stream = self._open(shard, first, offsets)
        start_byte = int(offsets[first]) if offsets is not None and first < len(offsets) else 0
        ends = offsets[first + 1 :] if offsets is not None else None
        url = self.shards.urls[shard]
        window = MappedWindow.of(stream, start_byte) if self.zero_copy and ready is None else None
        samples: Samples = iter_samples(stream, url=url, start=start_byte, ends=ends, window=window)
        if offsets is None and first:
            samples = itertools.islice(samples, first, None)
        if self.keep is not None:
            samples = map(self.keep_fields, samples)
        return samples, stream

    def keep_fields(self, sample: dict[str, Any]) -> dict[str, Any]:
        """The sample without the members ``fields`` leaves out (itself when there is no ``fields``)."""
        if self.keep is None:
            return sample
        return {k: v for k, v in sample.items() if k.startswith("__") or k in self.keep}

    def read_one(self, shard: int, index: int) -> dict[str, Any]:
        """Random access to one sample, for restoring a shuffle buffer."""
        samples, stream = self.samples(shard, index)
        with stream:
            for sample in samples:
                return sample
        raise ShardReadError(f"shard has no sample {index}", url=self.shards.urls[shard])

    # -- read-ahead ------------------------------------------------------------------------------------
    def start(self) -> None:
        """Begin a pass: a fresh read-ahead (the last pass's, if any, is closed)."""
        self.close()
        self._prefetcher = Prefetcher(self.prefetch, self.prefetch_bytes) if self.prefetch else None

    def read_ahead(self, segments: Segments, k: int) -> None:
        """Start opening segments k+1.. in the background while segment k is consumed."""
        if self._prefetcher is None:
            return
        for ahead in range(k + 1, k + 1 + self.prefetch):
            try:
                segment = segments[ahead]
            except IndexError:
                return
            self._prefetcher.schedule(ahead, self._opener_for(segment))

    def _opener_for(self, segment: Segment) -> Callable[[], tuple[Any, BinaryIO]]:
        def open_segment() -> tuple[Any, BinaryIO]:
            offsets = self.load_offsets(segment.shard)
            return offsets, self._open(segment.shard, segment.start, offsets)

        return open_segment

    def take_ahead(self, k: int) -> ReadAhead | None:
        """Segment k's read-ahead, if one was started (then its stream is the caller's)."""
        return self._prefetcher.take(k) if self._prefetcher is not None else None

    def close(self) -> None:
        if self._prefetcher is not None:
            self._prefetcher.close()
            self._prefetcher = None
