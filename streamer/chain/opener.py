"""Opening a shard at a sample: its offsets sidecar, then one seek or Range request, read ahead or not.

With the sidecar a reader starts at any sample with one seek; without it (no sidecar, a pipe, a
compressed shard) the samples before are read and dropped. Read-ahead opens the next shards in a
background thread while one is consumed. Members not in ``fields`` are dropped here, before buffering.
With ``zero_copy`` a plain local (or cached) shard is mapped and its members are memoryviews into it.
"""

from __future__ import annotations

import itertools
import os
import stat
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from shardstream.errors import FormatError, ShardReadError, redact_url
from shardstream.format import decode_offsets, iter_samples
from shardstream.format.constants import BLOCK
from shardstream.format.tarread import names_key, stale_sidecar
from shardstream.format.window import MappedWindow, SpanWindow
from shardstream.io.iostats import IO, thread_clock
from shardstream.io.openers import (
    OpenOptions,
    fetches_ahead,
    is_compressed,
    open_stream,
    read_range,
    read_small,
    seekable,
)
from shardstream.io.urls import local_path, scheme_of
from shardstream.userwarn import warn_user

from ..decode.fields import Fields
from ..placement.segments import Segment, Segments
from ..placement.shards import ShardList
from .prefetch import Prefetcher, ReadAhead

Samples = Iterator[dict[str, Any]]

try:  # a plain sample's headers in one C call
    from shardstream.format._tarscan import sample_at as _sample_at
except ImportError:
    _sample_at = None


def sample_in(
    buf: Any,
    members: Any,
    pos: int,
    stop: int,
    *,
    url: str,
    start: int,
    end: int,
    mapping: Any = None,
    limit: int = 0,
) -> dict[str, Any]:
    """The one sample in ``buf[pos:stop]``, bytes ``start``..``end`` of the shard at ``url`` (as shown: the
    caller cuts credentials out once per shard, since it goes into every sample's ``__url__``): one C call
    for a plain sample, else the general reader, which names any damage. ``members``: what member values
    slice (``buf``, or a view of ``mapping``, the mapped shard ``buf`` is); without a mapping, ``pos`` is 0.
    ``limit``: where ``buf``'s valid bytes end; the header at ``stop``, when below it, must not go on with
    the sample's key (else the sidecar split a sample: a StaleSidecarError). One compare, in bytes read
    with the sample's: what keeps a read by offsets as strict as reading front to back.
    Every read of one sample by its offsets comes here (deferred reads, restores, ShardMap)."""
    if _sample_at is not None:
        sample = _sample_at(buf, members, pos, stop, url, limit)
        if sample is not None:
            return sample
    window = MappedWindow(mapping, start) if mapping is not None else SpanWindow(buf, stop)
    spans: list[tuple[int, int]] = []
    try:
        for found in iter_samples(None, url=url, start=start, ends=(end,), window=window, spans=spans):  # type: ignore[arg-type]
            if (
                spans[-1][1] != end
            ):  # the archive ended inside the span: the shard is shorter than its sidecar
                raise stale_sidecar(f"sample {found['__key__']!r} ending at byte {spans[-1][1]}", end, url)
            if stop + BLOCK <= limit and names_key(buf, stop, found["__key__"]):
                raise stale_sidecar(f"sample {found['__key__']!r} going on past its end", end, url)
            return found
    except ShardReadError as exc:
        # The caller read the span whole, so a member cut short by the span's end runs past where the
        # sidecar ends the sample: the sidecar's, not the shard's, fault.
        if mapping is None and exc.message.startswith("truncated tar"):
            raise stale_sidecar(f"member {exc.member!r} running past it", end, url) from exc
        raise
    raise ShardReadError("no sample where the offsets sidecar puts one", url=url, offset=start)


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
        if not seekable(self.shards.urls[shard]):
            return None
        url = self.shards.offsets_url(shard)
        data = read_small(url, self.options, version=self.shards.metadata_version)
        if data is None:
            return None
        if not self._as_indexed(shard):
            return None  # read by its own headers, as a shard without a sidecar is
        expected = int(self.shards.counts[shard]) if self.shards.counts is not None else None
        try:
            return decode_offsets(data, source=url, samples=expected)
        except FormatError as exc:  # a shard's damage like any other: on_error="skip" counts it and goes on
            raise ShardReadError(f"{exc}; run shardstream index again", url=self.shards.urls[shard]) from exc

    def _as_indexed(self, shard: int) -> bool:
        """Whether a local shard still has the size its index gives, so its sidecar can be trusted: one
        stat per shard. One that does not is read front to back by its own headers (a warning says so):
        the samples before a cut are still good, and a rewritten shard gives what its bytes hold. A remote
        shard is checked sample by sample instead: each must hold one key and end where the sidecar says."""
        sizes, url = self.shards.sizes, self.shards.urls[shard]
        if sizes is None or scheme_of(url) != "file":
            return True
        try:
            found = os.stat(local_path(url))
        except OSError:
            return True  # opening the shard reports it
        if not stat.S_ISREG(found.st_mode) or found.st_size == sizes[shard]:
            return True  # (opening what is not a regular file reports what it is)
        warn_user(
            f"{redact_url(url)}: the shard is {found.st_size} bytes, its index says {int(sizes[shard])}: it "
            "changed after it was indexed, so its offsets sidecar is not used (reading it from its start); "
            "run `shardstream index` again"
        )
        return False

    # -- opening ---------------------------------------------------------------------------------------
    def _open(self, shard: int, first: int, offsets: Any) -> BinaryIO:
        start_byte = int(offsets[first]) if offsets is not None and first < len(offsets) else 0
        url, digest = self.shards.urls[shard], self.shards.sha256(shard)
        return open_stream(url, start_byte, self.options, sha256=digest)

    def samples(self, shard: int, first: int, ready: ReadAhead | None = None) -> tuple[Samples, BinaryIO]:
        """Samples of a shard from index ``first``, and the stream to close after them."""
        IO.shards += 1
        clock, started = thread_clock(), time.perf_counter()
        clock.opening = True  # the reads opening makes are its time, counted once, here
        try:
            if ready is not None:
                offsets = ready.wait_opened()
                self._keep_offsets(shard, offsets)
                stream: BinaryIO = ready  # type: ignore[assignment]
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
        its bytes and no more (one read, or one Range request), else the shard read up to it."""
        offsets = self.offsets(shard)
        if offsets is not None and index + 1 < len(offsets):
            url = self.shards.urls[shard]
            start, end = int(offsets[index]), int(offsets[index + 1])
            after = BLOCK if index + 2 < len(offsets) else 0  # the next sample's header, checked with it
            data = read_range(url, start, end + after, self.options, sha256=self.shards.sha256(shard))
            shown = redact_url(url)
            sample = sample_in(data, data, 0, end - start, url=shown, start=start, end=end, limit=len(data))
            return self.keep_fields(sample)
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
            # An object store's stream asks for its first parts itself once open: read one chunk of it
            # ahead, not prefetch_bytes, which would grow it to the budget the shard being read needs.
            url = self.shards.urls[segment.shard]
            ahead_bytes = 1 if fetches_ahead(url) else None
            self._prefetcher.schedule(ahead, self._opener_for(segment), ahead_bytes)

    def _opener_for(self, segment: Segment) -> Callable[[], tuple[Any, BinaryIO]]:
        def open_segment() -> tuple[Any, BinaryIO]:
            offsets = self.load_offsets(segment.shard)
            return offsets, self._open(segment.shard, segment.start, offsets)

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
