"""Opening a shard at a sample: its offsets sidecar (``sidecar.py``), then one seek or Range request, read
ahead or not.

With the sidecar a reader starts at any sample with one seek (a remote shard read from its start fetches
the sidecar while it opens); without it (no sidecar, a pipe, a
compressed shard) the samples before are read and dropped. Read-ahead opens the next shards in a
background thread while one is consumed. Members not in ``fields`` are dropped here, before buffering.
With ``zero_copy`` a plain local (or cached) shard is mapped and its members are memoryviews into it.
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, BinaryIO

from shardstream.errors import ShardReadError, redact_url
from shardstream.format import iter_samples
from shardstream.format.constants import BLOCK
from shardstream.format.window import MappedWindow
from shardstream.io.iostats import IO, thread_clock
from shardstream.io.openers import (
    OpenOptions,
    fetches_ahead,
    is_compressed,
    open_stream,
    read_range,
    seekable,
)
from shardstream.io.urls import scheme_of

from ..decode.fields import Fields
from ..placement.segments import Segment, Segments
from ..placement.shards import ShardList
from .onesample import sample_in
from .prefetch import Prefetcher, ReadAhead
from .sidecar import load_offsets, open_beside_offsets
from .subsetread import KeptBytes, KeptLayout, in_shard_offsets, kept_offsets, kept_only

Samples = Iterator[dict[str, Any]]


class ShardOpener:
    """Opens shards of ``shards`` at any sample; keeps the last ``offsets_kept`` shards' offsets; owns the
    read-ahead. ``options``: how shards are reached; ``fields``: the members kept (None: all);
    ``prefetch``/``prefetch_bytes``: shards and bytes read ahead; ``zero_copy``: members as views of
    mapped local shards."""

    def __init__(
        self,
        shards: ShardList,
        options: OpenOptions | None = None,
        *,
        fields: Fields | tuple[str, ...] | None = None,
        prefetch: int = 0,
        prefetch_bytes: int = 16 << 20,
        zero_copy: bool = False,
        offsets_kept: int = 1,
    ) -> None:
        self.shards = shards
        self.zero_copy = zero_copy
        self.options = options or OpenOptions()
        self.fields = Fields.of(fields)
        self.prefetch = prefetch
        self.prefetch_bytes = prefetch_bytes
        self._prefetcher: Prefetcher | None = None
        self.offsets_kept = offsets_kept
        self._offsets_cache: OrderedDict[int, Any] = OrderedDict()

    # -- offsets ---------------------------------------------------------------------------------------
    def offsets(self, shard: int) -> Any:
        """The shard's sample offsets (array of n+1) or None when it has no sidecar or cannot seek."""
        kept = self._offsets_cache
        if shard in kept:
            kept.move_to_end(shard)
            return kept[shard]
        values = self.load_offsets(shard)
        self._keep_offsets(shard, values)
        return values

    def _keep_offsets(self, shard: int, values: Any) -> None:
        kept = self._offsets_cache
        kept[shard] = values
        kept.move_to_end(shard)
        while len(kept) > self.offsets_kept:
            kept.popitem(last=False)

    def sample_offset(self, shard: int, index: int) -> int | None:
        """Byte offset of a sample's first header, when the sidecar is there."""
        return _offset_at(self.offsets(shard), index)

    def known_offset(self, shard: int, index: int) -> int | None:
        """``sample_offset`` from the offsets already loaded, or None: safe from another thread."""
        return _offset_at(self._offsets_cache.get(shard), index)

    def shown_url(self, shard: int) -> str:
        """The shard's URL as errors show it (credentials cut out)."""
        return redact_url(self.shards.urls[shard])

    def load_offsets(self, shard: int) -> Any:
        """Thread-safe: touches no opener state (the read-ahead thread calls it too)."""
        return load_offsets(self.shards, shard, self.options)

    # -- opening ---------------------------------------------------------------------------------------
    def _overlaps(self, shard: int, first: int) -> bool:
        """Whether the shard's sidecar is fetched while its stream opens (``sidecar.py``): read from its
        start, remote, its offsets not at hand."""
        return first == 0 and shard not in self._offsets_cache and self._remote(shard)

    def _remote(self, shard: int) -> bool:
        url = self.shards.urls[shard]
        return scheme_of(url) != "file" and seekable(url)

    def _open_beside_offsets(
        self, shard: int, keep: Callable[[Any], None] | None = None
    ) -> tuple[Any, BinaryIO]:
        """(offsets, stream), both at once; thread-safe (the read-ahead thread calls it too, keeping
        nothing: the reader keeps a read-ahead's offsets when it takes it)."""
        return open_beside_offsets(
            lambda: self.load_offsets(shard), lambda byte: self._open_at(shard, byte), keep
        )

    def _open(self, shard: int, first: int, offsets: Any) -> BinaryIO:
        start_byte = int(offsets[first]) if offsets is not None and first < len(offsets) else 0
        return self._open_at(shard, start_byte)

    def _open_at(self, shard: int, start_byte: int) -> BinaryIO:
        url, digest = self.shards.urls[shard], self.shards.sha256(shard)
        return open_stream(url, start_byte, self.options, sha256=digest)

    def samples(
        self, shard: int, first: int, ready: ReadAhead | None = None, *, stop: int | None = None
    ) -> tuple[Samples, Any]:
        """Samples of a shard from the ``first`` it holds (of a subset's: the ``first`` it keeps, and
        only those, up to the ``stop``-th kept (None: all), ``subsetread.py``), and what to close after."""
        indices = self.shards.kept_indices(shard)
        if indices is None:
            return self.run_samples(shard, first, ready)
        offsets = self.offsets(shard)
        if offsets is None:  # no sidecar to seek with: read it all, keep the kept
            samples, stream = self.run_samples(shard, 0)
            return kept_only(samples, indices, first), stream
        IO.shards += 1
        url, digest = self.shards.urls[shard], self.shards.sha256(shard)
        layout = KeptLayout(offsets, indices, first, stop)
        stream = KeptBytes(
            lambda byte: open_stream(url, byte, self.options, sha256=digest), layout.spans, flat=layout.flat
        )
        samples: Samples = iter_samples(stream, url=url, start=layout.start, ends=layout.ends)  # type: ignore[arg-type]
        if self.fields is not None:
            samples = map(self.fields.keep, samples)
        return in_shard_offsets(samples, layout), stream

    def plan_offsets(self, shard: int) -> Any:
        """The shard's offsets as plans number its samples: a subset's kept ones (``kept_offsets``)."""
        indices = self.shards.kept_indices(shard)
        offsets = self.offsets(shard)
        return offsets if indices is None else kept_offsets(offsets, indices)

    def run_samples(self, shard: int, first: int, ready: ReadAhead | None = None) -> tuple[Samples, BinaryIO]:
        """Samples of a shard from its sample ``first`` (its own numbering), and the stream to close."""
        IO.shards += 1
        clock, started = thread_clock(), time.perf_counter()
        clock.opening = True  # the reads opening makes are its time, counted once, here
        try:
            if ready is not None:
                offsets = ready.wait_opened()
                self._keep_offsets(shard, offsets)
                stream: BinaryIO = ready  # type: ignore[assignment]
            elif self._overlaps(shard, first):  # kept as they come: a watchdog names the byte meanwhile
                keep = partial(self._keep_offsets, shard)
                offsets, stream = self._open_beside_offsets(shard, keep)
            else:
                offsets = self.offsets(shard)
                stream = self._open(shard, first, offsets)
        finally:
            clock.opening = False
            clock.open += time.perf_counter() - started
        start_byte = int(offsets[first]) if offsets is not None and first < len(offsets) else 0
        ends = offsets[first + 1 :] if offsets is not None else None
        url = self.shards.urls[shard]
        # Only a plain shard maps: a compressed one's file holds other bytes than its tar (read by copying).
        mapped = self.zero_copy and ready is None and not is_compressed(url)
        window = MappedWindow.of(stream, start_byte) if mapped else None
        samples: Samples = iter_samples(stream, url=url, start=start_byte, ends=ends, window=window)
        if offsets is None and first:
            samples = itertools.islice(samples, first, None)
        if self.fields is not None:
            samples = map(self.fields.keep, samples)
        return samples, stream

    def keep_fields(self, sample: dict[str, Any]) -> dict[str, Any]:
        """The sample without the members ``fields`` leaves out (itself when there is no ``fields``; whole
        when it lacks one, so that the error for it names what it holds: ``decode/fields.py``)."""
        return sample if self.fields is None else self.fields.keep(sample)

    def read_one(self, shard: int, index: int) -> dict[str, Any]:
        """Random access to one sample (restoring a buffer, a stand-in, ShardMap): with the offsets sidecar
        its bytes and no more (one read, or one Range request), else the shard read up to it. ``index``
        counts a subset's samples among the kept ones, as plans do."""
        indices = self.shards.kept_indices(shard)
        if indices is not None:
            if not 0 <= index < len(indices):
                raise ShardReadError(
                    f"the subset keeps no sample {index} of this shard", url=self.shown_url(shard)
                )
            index = int(indices[index])
        offsets = self.offsets(shard)
        if offsets is not None and index + 1 < len(offsets):
            url = self.shards.urls[shard]
            start, end = int(offsets[index]), int(offsets[index + 1])
            after = BLOCK if index + 2 < len(offsets) else 0  # the next sample's header, checked with it
            data = read_range(url, start, end + after, self.options, sha256=self.shards.sha256(shard))
            shown = redact_url(url)
            sample = sample_in(data, data, 0, end - start, url=shown, start=start, end=end, limit=len(data))
            return self.keep_fields(sample)
        samples, stream = self.run_samples(shard, index)
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
            if self.shards.kept_indices(segment.shard) is not None:
                continue  # a subset's shard: reading it ahead would read the samples it leaves out
            # An object store's stream asks for its first parts itself once open: read one chunk of it
            # ahead, not prefetch_bytes, which would grow it to the budget the shard being read needs.
            url = self.shards.urls[segment.shard]
            ahead_bytes = 1 if fetches_ahead(url) else None
            self._prefetcher.schedule(ahead, self._opener_for(segment), ahead_bytes)

    def _opener_for(self, segment: Segment) -> Callable[[], tuple[Any, BinaryIO]]:
        shard = segment.shard

        def open_segment() -> tuple[Any, BinaryIO]:
            if segment.start == 0 and self._remote(shard):  # its sidecar fetched while it opens
                return self._open_beside_offsets(shard)
            offsets = self.load_offsets(shard)
            return offsets, self._open(shard, segment.start, offsets)

        return open_segment

    def take_ahead(self, k: int) -> ReadAhead | None:
        """Segment k's read-ahead, if one was started (then its stream is the caller's); counted a hit when
        there is one, a miss when read-ahead is on and there is none."""
        if self._prefetcher is None:
            return None
        ready = self._prefetcher.take(k)
        if ready is None:
            IO.readahead_misses += 1
        else:
            IO.readahead_hits += 1
        return ready

    def close(self) -> None:
        if self._prefetcher is not None:
            self._prefetcher.close()
            self._prefetcher = None


def _offset_at(offsets: Any, index: int) -> int | None:
    """Sample ``index``'s byte offset in ``offsets`` (a sidecar's array), or None without one."""
    return int(offsets[index]) if offsets is not None and index < len(offsets) else None
