"""A subset's per-shard sample masks in one binary file: counts read at once, a bit a sample; never keys."""

# Layout, little-endian throughout, every section on an 8-byte boundary but the blob's end:
#   header  32 bytes: magic b"SSSUBSET", uint32 layout version, uint32 flags (0), uint64 shard count n,
#           uint64 samples kept in all
#   kept    int64[n]: samples kept in each shard
#   starts  uint64[n + 1]: shard i's mask is blob[starts[i]:starts[i+1]]; an empty one means the shard is
#           kept whole (kept == its count) or left out whole (kept == 0)
#   blob    for each partly kept shard, ceil(count / 8) bytes: its mask packed a bit a sample, the first
#           sample in the lowest bit (numpy's packbits, bitorder "little"), the bits past the count zero
# A subset of 10^8 samples is 12.5 MB of bits at most; opening it reads the 16 bytes a shard before the
# blob, and a shard's bits are unpacked when that shard is read. The subset's JSON (subsetindex.py)
# records this file's size and sha256, so the file is checked whole before anything in it is trusted.

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import numpy as np

from ..errors import FormatError

MAGIC = b"SSSUBSET"
LAYOUT_VERSION = 1
HEADER = struct.Struct("<8sIIQQ")


def encode_masks(counts: Sequence[int] | np.ndarray, masks: Iterable[np.ndarray | None]) -> bytes:
    """The masks file for shards of ``counts`` samples; ``masks``: one per shard, a bool array of its
    count (True: kept), or None for a shard kept whole. ValueError for a mask of another length."""
    counts = np.asarray(counts, dtype=np.int64)
    kept = np.zeros(len(counts), dtype="<i8")
    starts = np.zeros(len(counts) + 1, dtype="<u8")
    pieces: list[bytes] = []
    at, shard = 0, -1
    for shard, mask in enumerate(masks):
        if shard >= len(counts):
            raise ValueError(f"masks: more than the {len(counts)} shards counted")
        count = int(counts[shard])
        if mask is None:
            kept[shard] = count
        else:
            mask = np.asarray(mask, dtype=bool)
            if mask.shape != (count,):
                raise ValueError(f"masks: shard {shard}'s mask has shape {mask.shape}, not ({count},)")
            kept[shard] = int(np.count_nonzero(mask))
            if 0 < kept[shard] < count:  # whole or none: no bits needed, the count says which
                piece = np.packbits(mask, bitorder="little").tobytes()
                pieces.append(piece)
                at += len(piece)
        starts[shard + 1] = at
    if shard + 1 != len(counts):
        raise ValueError(f"masks: {shard + 1} given for {len(counts)} shards")
    header = HEADER.pack(MAGIC, LAYOUT_VERSION, 0, len(counts), int(kept.sum()))
    return header + kept.tobytes() + starts.tobytes() + b"".join(pieces)


class SubsetMasks:
    """A masks file's kept counts (``kept``, an int64 array) and each shard's kept sample numbers, checked
    against the base dataset's ``counts`` when opened; every damage a FormatError naming ``source``."""

    def __init__(self, data: bytes, counts: np.ndarray, *, source: str) -> None:
        self.source = source
        n = len(counts)
        head = HEADER.size + 8 * n + 8 * (n + 1)
        if len(data) < HEADER.size:
            raise FormatError(f"{source}: {len(data)} bytes, shorter than the {HEADER.size}-byte header")
        magic, layout, _flags, shards, total = HEADER.unpack_from(data)
        if magic != MAGIC:
            raise FormatError(f"{source}: not a subset masks file (it does not start {MAGIC!r})")
        if layout != LAYOUT_VERSION:
            raise FormatError(
                f"{source}: subset masks layout {layout}; this shardstream reads {LAYOUT_VERSION}"
            )
        if shards != n:
            raise FormatError(
                f"{source}: masks for {shards} shards; the dataset has {n}: made for another one"
            )
        if len(data) < head:
            raise FormatError(f"{source}: {len(data)} bytes cannot hold the counts of {n} shards")
        self.kept = np.frombuffer(data, dtype="<i8", count=n, offset=HEADER.size)
        starts = np.frombuffer(data, dtype="<u8", count=n + 1, offset=HEADER.size + 8 * n)
        counts = np.asarray(counts, dtype=np.int64)
        if np.any(self.kept < 0) or np.any(self.kept > counts):
            shard = int(np.flatnonzero((self.kept < 0) | (self.kept > counts))[0])
            raise FormatError(
                f"{source}: shard {shard} keeps {int(self.kept[shard])} of its {int(counts[shard])} samples"
            )
        if int(self.kept.sum()) != total:
            raise FormatError(f"{source}: the header says {total} samples kept, the shards add up to another")
        sizes = np.diff(starts.astype(np.int64))
        partly = (self.kept > 0) & (self.kept < counts)
        wanted = np.where(partly, (counts + 7) // 8, 0)
        if starts[0] != 0 or np.any(sizes != wanted) or head + int(starts[-1]) != len(data):
            raise FormatError(f"{source}: its masks do not have the sizes its counts imply: damaged")
        self.counts = counts
        self._starts = starts
        self._blob = memoryview(data)[head:]
        self.total = int(total)

    def indices(self, shard: int) -> np.ndarray | None:
        """Shard ``shard``'s kept sample numbers, ascending (an int64 array), or None when it is kept
        whole. FormatError when its bits disagree with its count."""
        kept, count = int(self.kept[shard]), int(self.counts[shard])
        if kept == count:
            return None
        if kept == 0:
            return np.zeros(0, dtype=np.int64)
        raw = np.frombuffer(
            self._blob[int(self._starts[shard]) : int(self._starts[shard + 1])], dtype=np.uint8
        )
        bits = np.unpackbits(raw, bitorder="little")
        if bits[count:].any() or int(np.count_nonzero(bits[:count])) != kept:
            raise FormatError(
                f"{self.source}: shard {shard}'s mask does not hold the {kept} samples it counts"
            )
        return np.flatnonzero(bits[:count]).astype(np.int64)
