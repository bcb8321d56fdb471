"""A subset's shard read: its kept samples' bytes as one stream, one tar walk; a left-out byte never read.

Plans count a subset's samples by their place among the kept ones (``ShardList.kept_indices``); a
shard's own numbers are used only here, where bytes are read. ``KeptBytes`` hands the tar reader the
byte ranges of the kept runs end to end (each run of kept neighbours is one range), seeking the one open
stream between them where it can (a local file) and opening one a range where it cannot (HTTP, object
storage): the tar reader sees a valid archive of the kept samples, parses it in one pass with its fast
path, and no byte of a left-out sample is read, not even into a buffer. Byte offsets in errors are
turned back into the shard's own. The trade-off: a subset that keeps every other sample of a remote
shard makes a request per kept run (deferred, coalesced reads are for that).
"""

from __future__ import annotations

import bisect
import io
import mmap
import os
import stat
from array import array
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import numpy as np

from shardstream.errors import ShardReadError

Samples = Iterator[dict[str, Any]]

try:  # the mapped copy's loop in C (_gather.c); without a compiler, the same loop in Python
    from ._gather import gather as _native_gather
except ImportError:  # pragma: no cover - the build without a C compiler
    _native_gather = None


class KeptBytes(io.RawIOBase):
    """The bytes of ``spans`` ([start, end) of a shard, ascending, apart) end to end, read through streams
    from ``open_at(byte)``: the one stream is moved on with ``seek`` where it can, else replaced."""

    def __init__(
        self,
        open_at: Callable[[int], BinaryIO],
        spans: list[tuple[int, int]],
        *,
        flat: Any = None,
        native: bool = True,
    ) -> None:
        super().__init__()
        self.open_at, self.spans = open_at, spans
        self._gather = _native_gather if native else None  # the mapped copy's loop in C, when built
        self._flat: Any = flat  # the spans as int64 (start, end) pairs end to end, for the C copy
        self.stream: BinaryIO | None = None
        self.mapped: mmap.mmap | None = None
        self.next_span, self.left, self.at = 0, 0, 0

    def readable(self) -> bool:
        return True

    def readinto(self, view: Any) -> int:  # type: ignore[override]
        view = memoryview(view).cast("B")
        if self.stream is None and self.spans:
            self._first_open()
        if self.mapped is not None:
            return self._copy_into(view)
        filled = 0
        while filled < len(view):
            if self.left == 0:
                if self.next_span == len(self.spans):
                    break
                start, end = self.spans[self.next_span]
                self.next_span += 1
                self._move_to(start)
                self.left = end - start
            want = min(self.left, len(view) - filled)
            count = self.stream.readinto(view[filled : filled + want]) or 0  # type: ignore[union-attr]
            if count == 0:  # the shard ends early: the tar reader says so, with the offset
                self.left = 0
                self.next_span = len(self.spans)
                break
            filled += count
            self.left -= count
        return filled

    def _first_open(self) -> None:
        """The first span's stream; a plain local file is mapped, so a kept run costs a copy, not a seek
        and a read (a random half of 2 KB samples: 221,000 -> 255,000 a second in one process; 306,000
        with the copy in C and the layout in numpy, the whole dataset 470,000)."""
        self.stream = self.open_at(self.spans[0][0])
        try:
            fd = self.stream.fileno()  # type: ignore[union-attr]
            if stat.S_ISREG(os.fstat(fd).st_mode):
                self.mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            self.mapped = None  # no descriptor (HTTP, object storage, gzip), or an empty file: read it

    def _copy_into(self, view: memoryview) -> int:
        """``readinto`` from the mapped file: each span's bytes copied, no system call (one ``memcpy`` a
        span in ``_gather.c``; the same loop in Python without it)."""
        if self._gather is not None:
            if self._flat is None:
                self._flat = array("q", [x for span in self.spans for x in span])
            filled, self.next_span, self.left, self.at = self._gather(
                self.mapped, view, self._flat, self.next_span, self.left, self.at
            )
            return filled
        mapped, spans, filled, size = self.mapped, self.spans, 0, len(view)
        end = 0
        while filled < size:
            if self.left == 0:
                if self.next_span == len(spans):
                    break
                start, end = spans[self.next_span]
                self.next_span += 1
                self.left, self.at = end - start, start
            take = min(self.left, size - filled, max(len(mapped) - self.at, 0))  # type: ignore[arg-type]
            if take == 0:  # the shard ends early: the tar reader says so, with the offset
                self.left, self.next_span = 0, len(spans)
                break
            view[filled : filled + take] = mapped[self.at : self.at + take]  # type: ignore[index]
            filled += take
            self.left -= take
            self.at += take
        return filled

    def _move_to(self, start: int) -> None:
        stream = self.stream
        if stream is not None and getattr(stream, "seekable", lambda: False)():
            stream.seek(start)
            return
        if stream is not None:
            stream.close()
        self.stream = self.open_at(start)

    def close(self) -> None:
        try:
            if self.mapped is not None:
                self.mapped.close()
                self.mapped = None
            if self.stream is not None:
                self.stream.close()
                self.stream = None
        finally:
            super().close()


class KeptLayout:
    """Where the kept samples from the ``first``-th kept one (to the ``stop``-th, None: all) lie: their
    byte ``spans`` in the shard (no byte past the last, so a worker reads its own samples only), the
    ``start`` and ``ends`` of each sample in the stream of those spans (as the tar reader counts bytes),
    and the way back from such a byte to the shard's own (``shard_offset``)."""

    def __init__(self, offsets: Any, indices: np.ndarray, first: int, stop: int | None = None) -> None:
        # All in numpy: a random half of a 1,000-sample shard is ~250 runs, and a loop turn each was a
        # third of what reading such a subset cost.
        values = np.asarray(offsets, dtype=np.int64)
        chosen = np.asarray(indices[first:stop], dtype=np.int64)
        breaks = np.flatnonzero(np.diff(chosen) != 1) + 1
        firsts = np.concatenate(([0], breaks)).astype(np.int64) if len(chosen) else breaks
        lasts = np.concatenate((breaks, [len(chosen)])).astype(np.int64) - 1 if len(chosen) else breaks
        starts, ends = values[chosen[firsts]], values[chosen[lasts] + 1]
        self.flat = np.ascontiguousarray(np.column_stack((starts, ends)).ravel())  # (start, end) pairs
        self.spans = list(zip(starts.tolist(), ends.tolist(), strict=True))
        self.start = int(starts[0]) if len(starts) else 0
        self.ends = (self.start + np.cumsum(values[chosen + 1] - values[chosen])).tolist()
        self.bases = (
            (self.start + np.concatenate(([0], np.cumsum(ends - starts)[:-1]))).tolist()
            if len(starts)
            else []
        )

    def shard_offset(self, offset: int) -> int:
        """A byte of the kept stream as the byte of the shard it was read from."""
        span = max(bisect.bisect_right(self.bases, offset) - 1, 0)
        return self.spans[span][0] + offset - self.bases[span] if self.spans else offset


def in_shard_offsets(samples: Samples, layout: KeptLayout) -> Samples:
    """``samples``, with a ShardReadError's byte offset turned into the shard's own."""
    try:
        yield from samples
    except ShardReadError as exc:
        if exc.offset is None:
            raise
        raise type(exc)(
            exc.message, url=exc.url, member=exc.member, offset=layout.shard_offset(exc.offset)
        ) from exc


def kept_offsets(offsets: Any, indices: np.ndarray) -> np.ndarray | None:
    """A shard's offsets sidecar seen through its kept samples: the k-th kept sample's first byte at k, and
    the last one's end after them, so a byte offset finds its kept sample (None without a sidecar)."""
    if offsets is None or len(indices) == 0:
        return None
    values = np.asarray(offsets)
    return np.concatenate((values[indices], values[indices[-1] + 1 : indices[-1] + 2]))


def kept_only(samples: Samples, indices: np.ndarray, first: int) -> Samples:
    """A shard read from its first sample (no sidecar to seek with), its kept ones from the ``first``-th
    kept on: the fallback for a shard whose sidecar is missing or stale, which reads every sample."""
    wanted = iter(indices[first:].tolist())
    target = next(wanted, None)
    for number, sample in enumerate(samples):
        if target is None:
            return
        if number == target:
            yield sample
            target = next(wanted, None)
