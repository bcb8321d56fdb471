"""Read a worker's segments as samples, in order; a damaged sample goes to the Recovery, the rest reads on.

A sample is (shard index, sample index, dict); the dict is webdataset's: ``__key__``, ``__url__``, and
one bytes value per member extension. Opening (offsets, seeks, read-ahead) is the ``ShardOpener``'s;
what an error costs is the ``Recovery``'s; this node only walks the segments and keeps its position.
With ``deferred`` (behind a shuffle buffer), a shard that can be read by sample is not read here: its
items carry ``DEFERRED`` and the ``Fetch`` node after the buffer reads them (``deferred.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from shardstream.errors import ShardReadError

from ..placement.segments import Segment, Segments
from .deferred import DEFERRED, DeferredReads
from .node import Item, Node, state_int, state_keys_of
from .opener import ShardOpener
from .recovery import Recovery


class SampleReader(Node):
    """State: ``{"segment": k, "done": n}`` — n samples of segment k already handed out.

    ``opener``: the ShardOpener that opens shards (offsets, seeks, read-ahead); ``segments``: the worker's
    segments for the epoch, read in order; ``recovery``: what a damaged sample costs (None: a Recovery of
    its own, which raises); ``deferred``: behind a shuffle buffer, the DeferredReads whose shards are only
    named here, by id, and read after the buffer (None: every sample is read here).
    """

    state_keys = frozenset({"segment", "done"})

    def __init__(
        self,
        opener: ShardOpener,
        segments: Segments,
        recovery: Recovery | None = None,
        *,
        deferred: DeferredReads | None = None,
    ) -> None:
        super().__init__()
        self.opener = opener
        self.segments = segments
        self.recovery = recovery or Recovery()
        self.deferred = deferred
        self._segment = self._segment_start = self._position = 0

    def _current_state(self) -> dict[str, Any]:
        return {"segment": self._segment, "done": self._position - self._segment_start}

    def check_state(self, state: Any) -> None:
        """``segment`` one of the segments or just past the last (the epoch read), ``done`` within it;
        ValueError naming the key: a position past the segments ends the epoch short without a word."""
        state_keys_of(self, state, self.state_keys)
        k = state_int(self, state, "segment")
        if k and self._segment_at(k - 1) is None:
            raise ValueError(f"the saved SampleReader state has segment={k}, past this place's segments")
        segment = self._segment_at(k)
        size = 0 if segment is None else None if segment.stop is None else segment.stop - segment.start
        state_int(self, state, "done", 0, size)

    def read_one(self, shard: int, index: int) -> dict[str, Any] | None:
        if self.deferred is not None and self.deferred.offsets(shard) is not None:
            return DEFERRED
        return self.opener.read_one(shard, index)

    def _generate(self, state: dict[str, Any] | None) -> Iterator[Item]:
        k = state["segment"] if state else 0
        done = state["done"] if state else 0
        self._segment, self._segment_start, self._position = k, 0, done
        self.opener.start()
        try:
            while (segment := self._segment_at(k)) is not None:
                shard, stop = segment.shard, segment.stop
                position = self._position = segment.start + done
                self._segment, self._segment_start = k, segment.start
                if self.deferred is not None and (end := self._deferred_end(shard, stop)) is not None:
                    yield from self._ids(shard, position, end)
                    k, done = k + 1, 0
                    self._segment, self._segment_start, self._position = k, 0, 0
                    continue
                self.opener.read_ahead(self.segments, k)
                ready = self.opener.take_ahead(k) if done == 0 else None
                # The per-sample hot path, inline: a generator per segment cost one more hop per sample.
                while stop is None or position < stop:
                    stream = None
                    try:
                        samples, stream = self.opener.samples(shard, position, ready, stop=stop)
                        ready = None  # after an error the segment reopens at the next good sample, directly
                        for sample in samples:
                            item = (shard, position, sample)
                            position += 1
                            self._position = position
                            yield item
                            if position == stop:
                                break
                        else:
                            self._check_complete(shard, position, stop)
                        break
                    except ShardReadError as exc:
                        offsets = self.opener.plan_offsets(shard) if exc.offset is not None else None
                        resume_at = self.recovery.after_read_error(exc, segment, position, offsets)
                        if resume_at is None:
                            break
                        position = self._position = resume_at
                    finally:
                        if stream is not None:
                            stream.close()
                k, done = k + 1, 0
                self._segment, self._segment_start, self._position = k, 0, 0
        finally:
            self.opener.close()

    def _deferred_end(self, shard: int, stop: int | None) -> int | None:
        """Where a deferred segment ends, or None when the shard is read here (no sidecar, not local, or
        fewer samples than the segment asks for: reading finds and reports that)."""
        offsets = self.deferred.offsets(shard)  # type: ignore[union-attr]
        if offsets is None or self.opener.shards.kept_indices(shard) is not None:
            return None  # a subset's shard is read here, run by run (``subsetread.py``)
        count = len(offsets) - 1
        return count if stop is None else stop if stop <= count else None

    def _ids(self, shard: int, position: int, end: int) -> Iterator[Item]:
        advise, ahead = self.deferred.advise, position  # type: ignore[union-attr]
        while position < end:
            if position >= ahead:
                ahead = advise(shard, position, end)
            item = (shard, position, DEFERRED)
            position += 1
            self._position = position
            yield item

    def where(self) -> tuple[str, int | None] | None:
        """The shard URL (credentials cut out) this reader is in and the byte offset of the sample it is on
        (None when the sidecar is not loaded), or None past its segments. For a watchdog in another
        thread: reads attributes and caches only, loads nothing."""
        segment = self._segment_at(self._segment)
        if segment is None:
            return None
        return self.opener.shown_url(segment.shard), self.opener.known_offset(segment.shard, self._position)

    def _segment_at(self, k: int) -> Segment | None:
        try:
            return self.segments[k]
        except IndexError:
            return None

    def _check_complete(self, shard: int, position: int, stop: int | None) -> None:
        """A shard that ends before the index's count is damage, not the segment's end."""
        if stop is not None and position < stop:
            raise ShardReadError(
                f"shard ended after sample {position}; the index promises {stop} (cut short, or changed "
                "after it was indexed: run `shardstream index` again)",
                url=self.opener.shards.urls[shard],
            )
