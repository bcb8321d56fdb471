"""Read a worker's segments as samples: tar members grouped by key, starting mid-shard by one seek.

A sample is (shard index, sample index, dict); the dict is webdataset's: ``__key__``, ``__url__``, and
one bytes value per member extension. Members not in ``fields`` are dropped here, before any buffering.
"""

from __future__ import annotations

import bisect
import itertools
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO

from packer.errors import ShardReadError
from packer.format import decode_offsets
from packer.format.tarread import iter_samples

from .nodes import Node
from .openers import OpenOptions, open_stream, read_small, seekable
from .placement import Segment
from .prefetch import Prefetcher, ReadAhead
from .shards import ShardList
from .shared import SharedState

RawSample = tuple[int, int, dict[str, Any]]
ON_ERROR = ("raise", "skip", "warn")


class SampleReader(Node[RawSample]):
    """State: ``{"segment": k, "done": n}`` — n samples of segment k already handed out."""

    def __init__(
        self,
        shards: ShardList,
        segments: Sequence[Segment] | Any,
        *,
        fields: Sequence[str] | None = None,
        on_error: str = "raise",
        counters: SharedState | None = None,
        options: OpenOptions | None = None,
        prefetch: int = 0,
        prefetch_bytes: int = 16 << 20,
        keep_length: bool = True,
    ) -> None:
        super().__init__()
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, not {on_error!r}")
        self.shards = shards
        self.segments = segments
        self.keep = frozenset(fields) if fields else None
        self.on_error = on_error
        self.counters = counters or SharedState()
        self.options = options or OpenOptions()
        self.prefetch = prefetch
        self.prefetch_bytes = prefetch_bytes
        self._prefetcher: Prefetcher | None = None
        self.keep_length = keep_length
        self._deficit = 0  # skipped samples still to be stood in for
        self._last: tuple[int, int, Any] | None = None  # the last sample handed out
        self._segment = self._segment_start = self._position = 0
        self._offsets_cache: tuple[int, Any] | None = None

    # -- offsets ---------------------------------------------------------------------------------------
    def offsets(self, shard: int) -> Any:
        """The shard's sample offsets (array of n+1) or None when it has no sidecar or cannot seek."""
        if self._offsets_cache is not None and self._offsets_cache[0] == shard:
            return self._offsets_cache[1]
        values = self._load_offsets(shard)
        self._offsets_cache = (shard, values)
        return values

    def _load_offsets(self, shard: int) -> Any:
        """Thread-safe: touches no reader state (the prefetch thread calls it too)."""
        if not seekable(self.shards.urls[shard]):
            return None
        data = read_small(self.shards.offsets_url(shard), self.options)
        if data is None:
            return None
        expected = int(self.shards.counts[shard]) if self.shards.counts is not None else None
        return decode_offsets(data, source=self.shards.offsets_url(shard), samples=expected)

    def _open(self, shard: int, first: int, offsets: Any) -> BinaryIO:
        start_byte = int(offsets[first]) if offsets is not None and first < len(offsets) else 0
        url, digest = self.shards.urls[shard], self.shards.sha256(shard)
        return open_stream(url, start_byte, self.options, sha256=digest)

    def _schedule(self, k: int) -> None:
        """Start reading segments k+1.. in the background while segment k is consumed."""
        if self._prefetcher is None:
            return
        for ahead in range(k + 1, k + 1 + self.prefetch):
            try:
                segment = self.segments[ahead]
            except IndexError:
                return

            def opener(segment: Segment = segment) -> tuple[Any, BinaryIO]:
                offsets = self._load_offsets(segment.shard)
                return offsets, self._open(segment.shard, segment.start, offsets)

            self._prefetcher.schedule(ahead, opener)

    # -- reading ---------------------------------------------------------------------------------------
    def _open_samples(
        self, shard: int, first: int, ready: ReadAhead | None = None
    ) -> tuple[Iterator[dict[str, Any]], BinaryIO]:
        """Samples of a shard from index ``first``, and the stream to close after them.

        With the offsets sidecar the stream starts at the sample (one seek); without, earlier ones are read
        and skipped.
        """
        url = self.shards.urls[shard]
        if ready is not None:
            offsets = ready.wait_opened()
            self._offsets_cache = (shard, offsets)
            stream: BinaryIO = ready  # type: ignore[assignment]
        else:
            offsets = self.offsets(shard)
            stream = self._open(shard, first, offsets)
        start_byte = int(offsets[first]) if offsets is not None and first < len(offsets) else 0
        ends = offsets[first + 1 :] if offsets is not None else None
        samples: Iterator[dict[str, Any]] = iter_samples(stream, url=url, start=start_byte, ends=ends)
        if offsets is None and first:
            samples = itertools.islice(samples, first, None)
        if self.keep is not None:
            samples = map(self._filter, samples)
        return samples, stream

    def _filter(self, sample: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in sample.items() if k.startswith("__") or k in self.keep}  # type: ignore[operator]

    def read_one(self, shard: int, index: int) -> dict[str, Any]:
        """Random access to one sample, for restoring a shuffle buffer."""
        samples, stream = self._open_samples(shard, index)
        with stream:
            for sample in samples:
                return sample
        raise ShardReadError(f"shard has no sample {index}", url=self.shards.urls[shard])

    def get_state(self) -> dict[str, Any]:
        state = {"segment": self._segment, "done": self._position - self._segment_start}
        if self._deficit or self._last is not None:
            state["deficit"] = self._deficit
            state["last"] = (self._last[0], self._last[1]) if self._last is not None else None
        return state

    def _generate(self, state: dict[str, Any] | None) -> Iterator[RawSample]:
        k = state["segment"] if state else 0
        done = state["done"] if state else 0
        self._deficit = state.get("deficit", 0) if state else 0
        last = state.get("last") if state else None
        self._last = (last[0], last[1], None) if last is not None else None
        self._segment, self._segment_start, self._position = k, 0, done
        if self._prefetcher is not None:
            self._prefetcher.close()
        self._prefetcher = Prefetcher(self.prefetch, self.prefetch_bytes) if self.prefetch else None
        try:
            if self._deficit and self._last is not None:  # saved while repeats were still owed
                yield from self._repeats(self._last)
            while True:
                try:
                    segment = self.segments[k]
                except IndexError:
                    if self._deficit and self._last is not None:  # the damage came last: repeat from before
                        yield from self._repeats(self._last)
                    return
                self._segment, self._segment_start = k, segment.start
                self._schedule(k)
                # The per-sample hot path, inline rather than a generator per segment: state lives in
                # attributes and get_state builds the dict.
                shard, stop = segment.shard, segment.stop
                position = self._position = segment.start + done
                ready = self._prefetcher.take(k) if self._prefetcher is not None and done == 0 else None
                while stop is None or position < stop:
                    stream = None
                    try:
                        samples, stream = self._open_samples(shard, position, ready)
                        ready = None  # after an error the segment reopens at the next good sample, directly
                        for sample in samples:
                            item = (shard, position, sample)
                            position += 1
                            self._position = position
                            self._last = item
                            yield item
                            if self._deficit:
                                yield from self._repeats(item)
                            if position == stop:
                                break
                        else:
                            if stop is not None and position < stop:
                                raise ShardReadError(
                                    f"shard ended after sample {position}; the index promises {stop}",
                                    url=self.shards.urls[shard],
                                )
                        break
                    except ShardReadError as exc:
                        next_position = self._recover(exc, segment, position)
                        if next_position is None:
                            break
                        position = self._position = next_position
                    finally:
                        if stream is not None:
                            stream.close()
                k, done = k + 1, 0
                self._segment, self._segment_start, self._position = k, 0, 0
        finally:
            if self._prefetcher is not None:
                self._prefetcher.close()

    def _repeats(self, item: tuple[int, int, Any]) -> Iterator[RawSample]:
        """Stand-ins for skipped samples, so a rank keeps its promised length (DDP needs equal steps)."""
        shard, index, sample = item
        if sample is None:  # known by position only, from a saved state
            sample = self.read_one(shard, index)
        while self._deficit:
            self._deficit -= 1
            self.counters.add("samples_repeated", 1)
            yield shard, index, dict(sample)

    def _recover(self, exc: ShardReadError, segment: Segment, position: int) -> int | None:
        """After a read error: raise, or skip the damaged sample and return where to go on (None: give up)."""
        if self.on_error == "raise":
            raise exc
        if self.on_error == "warn":
            warnings.warn(f"skipping: {exc}", stacklevel=3)
        offsets = self.offsets(segment.shard) if exc.offset is not None else None
        if offsets is not None:
            bad = max(position, bisect.bisect_right(offsets, exc.offset) - 1)
            last = len(offsets) - 1
            if bad + 1 < (segment.stop if segment.stop is not None else last):
                self._skipped(1, counted=segment.stop is not None)
                return bad + 1
        lost = (segment.stop - position) if segment.stop is not None else 1
        self._skipped(max(lost, 0), counted=segment.stop is not None)
        self.counters.add("shards_failed", 1)
        return None

    def _skipped(self, count: int, *, counted: bool) -> None:
        self.counters.add("samples_skipped", count)
        if counted and self.keep_length:
            self._deficit += count
