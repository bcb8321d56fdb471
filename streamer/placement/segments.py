"""Which samples each rank and worker reads in an epoch: pure functions of the dataset shape and the seed.

With per-shard counts, the epoch's shard order (permuted by seed and epoch *before* splitting) is laid end
to end as one virtual stream; every rank takes an equal contiguous slice, and worker i of every rank takes
the same-sized sub-slice, so ranks yield equal sample and batch counts however uneven the shards are.
Slices cut shards where they must; a reader starts mid-shard through the offsets sidecar. Without counts,
whole shards are dealt round-robin and ranks can differ.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .permute import Permutation

try:  # the stream's prefix sums in C (_order.c); without a compiler, numpy's (with a temporary)
    from ._order import ends as _native_ends
except ImportError:  # pragma: no cover - the build without a C compiler
    _native_ends = None

REMAINDERS = ("drop", "pad")


@dataclass(frozen=True)
class Segment:
    """Samples ``start`` to ``stop`` (exclusive, by index in the shard) of shard ``shard`` (its number in
    the ShardList); ``stop`` None means to the shard's end (count unknown)."""

    shard: int
    start: int
    stop: int | None


class Segments(Protocol):
    """A worker's segments for one epoch, by number: a list, ``WholeShards``, or endless ``ResampledShards``.

    ``segments[k]`` raises IndexError past the last one (never, for an endless draw).
    """

    def __getitem__(self, k: int) -> Segment: ...


def rank_quota(total: int, world: int, remainder: str) -> int:
    """Samples per rank per epoch: equal on every rank."""
    if remainder not in REMAINDERS:
        raise ValueError(f"remainder must be one of {REMAINDERS}, not {remainder!r}")
    return total // world if remainder == "drop" else -(-total // world)


def worker_slice(quota: int, worker: int, workers: int) -> tuple[int, int]:
    """(offset, length) of a worker's part of its rank's quota; identical for worker i on every rank."""
    base, extra = divmod(quota, workers)
    return worker * base + min(worker, extra), base + (1 if worker < extra else 0)


def shard_order(n: int, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
    return Permutation(n, seed, epoch).array() if shuffle else np.arange(n, dtype=np.int64)


def stream_ends(counts: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Where each shard of ``order`` ends in the epoch's stream: ``cumsum(counts[order])``, as int64."""
    if _native_ends is None:
        return np.cumsum(np.asarray(counts, dtype=np.int64)[order])
    ends = np.empty(len(order), dtype=np.int64)
    contiguous = np.ascontiguousarray
    _native_ends(contiguous(counts, dtype=np.int64), contiguous(order, dtype=np.int64), ends)
    return ends


def counted_segments(
    counts: np.ndarray,
    *,
    rank: int,
    world: int,
    worker: int,
    workers: int,
    seed: int,
    epoch: int,
    shuffle: bool = True,
    remainder: str = "drop",
) -> list[Segment]:
    """The segments one worker reads in one epoch, when every shard's sample count is known."""
    check_place(rank, world, worker, workers)
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return []
    order = shard_order(len(counts), seed, epoch, shuffle)
    ends = stream_ends(counts, order)
    quota = rank_quota(total, world, remainder)
    offset, length = worker_slice(quota, worker, workers)
    start = rank * quota + offset
    segments: list[Segment] = []
    # With "pad" the last ranks run past the end and wrap around to the stream's start.
    position, stop = start, start + length
    while position < stop:
        lap_start = position % total
        take = min(stop - position, total - lap_start)
        segments.extend(stream_to_segments(order, ends, counts, lap_start, lap_start + take))
        position += take
    return segments


def stream_to_segments(
    order: np.ndarray, ends: np.ndarray, counts: np.ndarray, begin: int, end: int
) -> Iterator[Segment]:
    i = int(np.searchsorted(ends, begin, side="right"))
    while begin < end:
        shard = int(order[i])
        shard_start = int(ends[i]) - int(counts[shard])
        take_to = min(end, int(ends[i]))
        if take_to > begin:
            yield Segment(shard, begin - shard_start, take_to - shard_start)
        begin = max(begin, take_to)
        i += 1


class WholeShards(Sequence[Segment]):
    """Uncounted shards, permuted then dealt round-robin to all ranks x workers; O(1) memory at any size."""

    def __init__(
        self,
        n: int,
        *,
        rank: int,
        world: int,
        worker: int,
        workers: int,
        seed: int,
        epoch: int,
        shuffle: bool = True,
    ) -> None:
        check_place(rank, world, worker, workers)
        self.n = n
        self.first = rank * workers + worker
        self.step = world * workers
        self.permutation = Permutation(n, seed, epoch) if shuffle else None

    def __len__(self) -> int:
        return max(0, -(-(self.n - self.first) // self.step))

    def __getitem__(self, k: int) -> Segment:  # type: ignore[override]
        if not 0 <= k < len(self):
            raise IndexError(k)
        position = self.first + k * self.step
        shard = self.permutation(position) if self.permutation else position
        return Segment(shard, 0, None)


class ResampledShards:
    """An endless, deterministic draw of shards with replacement, different for every worker and epoch."""

    def __init__(self, n: int, *, rank: int, world: int, worker: int, workers: int, seed: int, epoch: int):
        check_place(rank, world, worker, workers)
        self.n = n
        self.prefix = f"{seed}:{epoch}:{rank * workers + worker}:"

    def __getitem__(self, k: int) -> Segment:
        digest = hashlib.blake2b(f"{self.prefix}{k}".encode(), digest_size=8).digest()
        return Segment(int.from_bytes(digest, "little") % self.n, 0, None)


def check_place(rank: int, world: int, worker: int, workers: int) -> None:
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"rank must be in [0, world_size), got rank={rank}, world_size={world}")
    if workers < 1 or not 0 <= worker < workers:
        raise ValueError(f"worker must be in [0, workers), got worker={worker}, workers={workers}")
