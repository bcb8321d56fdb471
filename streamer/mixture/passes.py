"""A mixture source's pass stream: pass after pass over its shards, each pass in a new shard order.

Position x of the stream is sample x mod N of pass x // N, so reading a source k times over is reading
[0, k N) of its stream, every sample once per pass. Shard orders are keyed by the source's name, never its
place in the list, so adding or removing another source changes nothing here. Within a worker, samples
are shuffled in windows: runs of at most ``window`` consecutive stream positions, never across a pass
boundary, each handed out in its own keyed shuffle. Trade-off: a window shuffles less than a reservoir
buffer would, but which samples are out after c of them is a pure function of c, so a restore re-reads one
window per source instead of replaying a buffer's history.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import numpy as np

from ..placement.permute import mix
from ..placement.segments import Segment, shard_order, stream_to_segments

ORDER_BATCH = 2048  # positions whose window orders are made at once (whole windows, at least one)


class PassStream:
    """Shards with ``counts`` samples, read in passes; ``seed`` and ``salt`` key the shard orders."""

    def __init__(
        self, counts: np.ndarray, *, seed: int, salt: str, shuffle: bool = True, base: int = 0
    ) -> None:
        self.counts = np.asarray(counts, dtype=np.int64)
        self.size = int(self.counts.sum())
        if self.size < 1:
            raise ValueError(f"{salt}: a pass stream needs at least one sample")
        self.seed, self.salt, self.shuffle = seed, salt, shuffle
        self.base = base  # added to every shard number: where this source's shards sit in a longer list
        self._pass: tuple[int, np.ndarray, np.ndarray] | None = None  # the last pass's order and ends
        self._window_key = np.uint64(_pass_seed(seed, f"window:{salt}"))
        self._orders: dict[int, list[int]] = {}  # the next windows' orders, by their first position
        self._found = (-1, 0, 0, 0)  # at()'s last shard: pass, its first and end positions, shard

    def _order(self, number: int) -> tuple[np.ndarray, np.ndarray]:
        if self._pass is None or self._pass[0] != number:
            order = shard_order(len(self.counts), _pass_seed(self.seed, self.salt), number, self.shuffle)
            self._pass = (number, order, np.cumsum(self.counts[order]))
        return self._pass[1], self._pass[2]

    def segments(self, begin: int, end: int) -> Iterator[Segment]:
        """The segments of stream positions [begin, end), pass by pass."""
        while begin < end:
            number, first = divmod(begin, self.size)
            last = min(end - number * self.size, self.size)
            order, ends = self._order(number)
            for segment in stream_to_segments(order, ends, self.counts, first, last):
                yield (
                    Segment(segment.shard + self.base, segment.start, segment.stop) if self.base else segment
                )
            begin = number * self.size + last

    def window(self, begin: int, end: int, window: int, offset: int) -> tuple[int, int]:
        """[lo, hi): the window holding position ``begin + offset`` of the run [begin, end)."""
        x = begin + offset
        piece = max(begin, x // self.size * self.size)  # where this pass's part of the run starts
        lo = piece + (x - piece) // window * window
        return lo, min(lo + window, (x // self.size + 1) * self.size, end)

    def window_order(self, lo: int, hi: int) -> list[int]:
        """The order a window's samples go out in; keyed by the window's place, so any worker agrees."""
        if not self.shuffle:
            return list(range(hi - lo))
        cached = self._orders.pop(lo, None)
        if cached is not None and len(cached) == hi - lo:
            return cached
        # Sorting positions by a keyed hash is a uniform shuffle that needs no RNG state to reproduce. The
        # next windows of the same width are ordered in the same numpy calls (a row each), as a reader asks
        # for them in turn: their fixed cost was a tenth of a one-source mixture's time at 100-sample
        # windows. (Array arithmetic wraps modulo 2^64 without a warning; only numpy scalars warn.)
        width = hi - lo
        rows = max(1, ORDER_BATCH // width)
        positions = np.arange(lo, lo + rows * width, dtype=np.uint64).reshape(rows, width)
        orders = np.argsort(mix(positions ^ self._window_key), axis=1, kind="stable").tolist()
        self._orders = {lo + row * width: order for row, order in enumerate(orders[1:], 1)}
        return orders[0]

    def at(self, position: int) -> tuple[int, int]:
        """(shard, index) of the sample at stream position ``position``."""
        number, x = divmod(position, self.size)
        found = self._found  # a window's ends mostly fall in the shard the last one did
        if found[0] == number and found[1] <= x < found[2]:
            return found[3], x - found[1]
        order, ends = self._order(number)
        i = int(np.searchsorted(ends, x, side="right"))
        shard, end = int(order[i]), int(ends[i])
        start = end - int(self.counts[shard])
        self._found = (number, start, end, shard + self.base)
        return shard + self.base, x - start


class RunSegments:
    """Segments of one run [begin, end) of a pass stream, made as a reader asks for them: O(one pass)."""

    def __init__(self, stream: PassStream, begin: int, end: int) -> None:
        self.stream, self.begin, self.end = stream, begin, end
        self._restart()

    def _restart(self) -> None:
        self._made: list[Segment] = []
        self._base = 0  # the number of self._made[0]
        self._source = self.stream.segments(self.begin, self.end)

    def __getitem__(self, k: int) -> Segment:
        if k < self._base:
            self._restart()
        if k - self._base > 64:  # a reader looks back at most one segment (plus read-ahead forward)
            keep = min(k - self._base - 1, len(self._made))  # not past what was made: a jump forward
            del self._made[:keep]
            self._base += keep
        while k - self._base >= len(self._made):
            segment = next(self._source, None)
            if segment is None:
                raise IndexError(k)
            self._made.append(segment)
        return self._made[k - self._base]


def _pass_seed(seed: int, salt: str) -> int:
    # Permutation keys hash (salt, seed, epoch) as text; folding the source name into the seed keeps
    # every source's orders apart while the pass number plays the epoch's part.
    text = f"{salt}\x00{seed}"
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
