"""A subset's shard read: only its kept samples, each run of kept neighbours from one seek; never the rest.

Plans count a subset's samples by their place among the kept ones (``ShardList.kept_indices``); a shard's
own numbers are used only here, where bytes are read. Each run of consecutive kept samples opens the shard
at its first (one seek locally, one ranged request remotely) and reads up to the byte where the next
sample begins (``Bounded``): a left-out sample's bytes are never read, not even into a read-ahead
buffer. The trade-offs: a subset that keeps every other sample opens a stream for every kept one, and a
run's last sample is not checked against the header after it (the sidecar's end is trusted there).
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import numpy as np

from shardstream.format.subsetmasks import runs

Samples = Iterator[dict[str, Any]]
# (first sample, stop sample, read-ahead) -> samples, stream: the shard's samples first..stop-1
OpenRun = Callable[[int, int, Any], tuple[Samples, BinaryIO]]


class RunStreams:
    """The stream of the run being read; ``close()`` closes it (the reader closes what it was given)."""

    def __init__(self) -> None:
        self.stream: BinaryIO | None = None

    def close(self) -> None:
        if self.stream is not None:
            stream, self.stream = self.stream, None
            stream.close()


def kept_samples(
    open_run: OpenRun, indices: np.ndarray, first: int, ready: Any
) -> tuple[Samples, RunStreams]:
    """The shard's kept samples from the ``first``-th kept one (``indices``: the kept sample numbers),
    read run by run through ``open_run(first, stop, ready)``; ``ready``: a read-ahead opened at the first
    of them (None: none). Returns the samples and what to close after them."""
    streams = RunStreams()

    def generate() -> Samples:
        handed = ready
        for start, stop in runs(indices[first:]):
            samples, stream = open_run(start, stop, handed)
            handed, streams.stream = None, stream
            yield from itertools.islice(samples, stop - start)
            if streams.stream is stream:
                streams.close()

    return generate(), streams


def kept_offsets(offsets: Any, indices: np.ndarray) -> np.ndarray | None:
    """A shard's offsets sidecar seen through its kept samples: the k-th kept sample's first byte at k, and
    the last one's end after them, so a byte offset finds its kept sample (None without a sidecar)."""
    if offsets is None or len(indices) == 0:
        return None
    values = np.asarray(offsets)
    return np.concatenate((values[indices], values[indices[-1] + 1 : indices[-1] + 2]))


class Bounded(io.RawIOBase):
    """``stream`` read no further than ``limit`` bytes from where it stands; closing it closes ``stream``."""

    def __init__(self, stream: BinaryIO, limit: int) -> None:
        super().__init__()
        self.stream, self.left = stream, max(limit, 0)

    def readable(self) -> bool:
        return True

    def readinto(self, view: Any) -> int:  # type: ignore[override]
        if self.left <= 0:
            return 0
        view = memoryview(view).cast("B")[: self.left]
        readinto = getattr(self.stream, "readinto", None)
        if readinto is not None:
            count = readinto(view) or 0
        else:
            data = self.stream.read(len(view))
            count = len(data)
            view[:count] = data
        self.left -= count
        return count

    def close(self) -> None:
        try:
            self.stream.close()
        finally:
            super().close()
