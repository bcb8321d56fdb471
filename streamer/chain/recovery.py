"""The error policy of one stream: raise a damaged sample, or skip it, count it, and owe a stand-in for it.

Every node that can lose a sample (the reader on damaged bytes, the decoder on undecodable ones) asks the
same ``Recovery``. What it owes is paid by one node, ``StandIns``, at the end of the chain: with counts
known and ``keep_length``, each lost sample is stood in for by a repeat, so every rank keeps its length.
A restore that must read again what was already read and accounted for (a mixture's window) does so
``replaying``: the same samples are skipped, and nothing is raised, warned, counted or owed twice.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from shardstream.errors import StaleSidecarError, StreamError
from shardstream.userwarn import warn_user

from ..datasets.options import Errors
from ..datasets.shared import SharedState
from ..placement.segments import Segment

Locate = Callable[[int, int], "int | None"]  # (shard, sample index) -> byte offset of the sample


class Recovery:
    """Decides what an error costs; ``owed`` counts the stand-ins not yet paid (StandIns saves it).

    ``errors``: the policy (None: ``Errors()``, which raises); ``counters``: where skipped samples and
    failed shards are counted (the dataset's ``SharedState``, summed over workers; None: one of its own);
    ``counted``: whether a length is promised (counts known, not resampled), so losses owe stand-ins
    (with ``keep_length``, unless errors raise); ``locate``: ``(shard, index) -> byte offset``, so
    a decoding error raised names where its sample lies (None: it names no offset).
    """

    def __init__(
        self,
        errors: Errors | None = None,
        *,
        counters: SharedState | None = None,
        counted: bool = True,
        locate: Locate | None = None,
    ) -> None:
        self.errors = errors or Errors()
        self.counters = counters or SharedState()
        # Stand-ins keep a promised length; a length is promised only when the counts are known.
        self.owes = self.errors.keep_length and counted and self.errors.on_error != "raise"
        self.locate = locate
        self.owed = 0
        self._replaying = False

    @contextlib.contextmanager
    def replaying(self) -> Iterator[None]:
        """Reads that repeat reads already accounted for: losses are skipped as before, and left uncounted."""
        self._replaying = True
        try:
            yield
        finally:
            self._replaying = False

    def after_read_error(self, exc: StreamError, segment: Segment, position: int, offsets: Any) -> int | None:
        """After a read error at ``position`` in ``segment``: raise, or skip the damaged sample and return the
        position to go on from (None: the rest of the segment is lost). ``offsets``: the shard's sidecar."""
        self._raise_or_warn(exc)
        # A stale sidecar's next offset is as wrong as the one that failed: the rest of the segment is lost.
        if offsets is not None and exc.offset is not None and not isinstance(exc, StaleSidecarError):
            bad = max(position, bisect.bisect_right(offsets, exc.offset) - 1)
            end = segment.stop if segment.stop is not None else len(offsets) - 1
            if bad + 1 < end:
                self._lost(1)
                return bad + 1
        lost = (segment.stop - position) if segment.stop is not None else 1
        self._lost(max(lost, 0))
        if not self._replaying:
            self.counters.add("shards_failed", 1)
        return None

    def after_lost_sample(self, exc: StreamError, *, shard_failed: bool = False) -> None:
        """One sample read on its own (a deferred read) failed: raise it, or skip it alone. ``shard_failed``:
        the first such loss of a shard found cut short, counted as a failed shard as a reader's would be."""
        self._raise_or_warn(exc)
        self._lost(1)
        if shard_failed and not self._replaying:
            self.counters.add("shards_failed", 1)

    def after_sample_error(self, exc: StreamError, shard: int, index: int) -> None:
        """A sample read whole failed later (decoding): raise it with its byte offset, or skip it."""
        if self._replaying:
            return
        if self.errors.on_error == "raise" and self.locate is not None:
            raise exc.located(self.locate(shard, index)) from exc.__cause__ or exc
        self._raise_or_warn(exc)
        self.counters.add("decode_errors", 1)
        if self.owes:
            self.owed += 1

    def _raise_or_warn(self, exc: StreamError) -> None:
        if self._replaying:
            return
        if self.errors.on_error == "raise":
            raise exc
        if self.errors.on_error == "warn":
            warn_user(f"skipping: {exc}")

    def _lost(self, count: int) -> None:
        if self._replaying:
            return
        self.counters.add("samples_skipped", count)
        if self.owes:
            self.owed += count
