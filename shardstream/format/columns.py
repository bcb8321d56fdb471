"""An index's per-shard columns in one binary file: loaded without parsing, 48 B a shard; not greppable."""

# Layout, little-endian throughout, every section but the last on an 8-byte boundary:
#   header   32 bytes: magic b"SSCOLUMN", uint32 layout version, uint32 flags, uint64 shard count n,
#            uint64 length of the names blob (0 without FLAG_NAMES)
#   samples  int64[n]
#   bytes    int64[n]
#   sha256   uint8[n][32], raw digests, all zero where none was computed      (with FLAG_SHA256)
#   offsets  uint64[n + 1] into the blob: name i is blob[offsets[i]:offsets[i+1]]  (with FLAG_NAMES)
#   names    the names' UTF-8 bytes, end to end                                (with FLAG_NAMES)
# Names are stored only when no brace pattern names the shards. The index JSON records this file's size and
# sha256, so the pair is checked whole before anything here is trusted.

from __future__ import annotations

import operator
import re
import struct
import sys
from array import array
from collections.abc import Iterator, Sequence
from itertools import accumulate
from typing import Any

from ..errors import FormatError
from .constants import COLUMNS_MAGIC, COLUMNS_SUFFIX
from .entry import ShardEntry
from .patterns import BracePattern

LAYOUT_VERSION = 1
FLAG_SHA256 = 1  # the sha256 column is there: some shard has a digest
FLAG_ALL_SHA256 = 2  # every shard has one
FLAG_NAMES = 4  # the names are stored: no brace pattern names the shards
HEADER = struct.Struct("<8sIIQQ")
PATTERN_CHECKS = 4096  # names checked against the pattern when writing: both ends and this many between
_I64 = struct.Struct("<q")
_U64 = struct.Struct("<Q")
_U64_PAIR = struct.Struct("<QQ")
_NO_DIGEST = bytes(32)
_HEX64 = re.compile("[0-9a-fA-F]{64}")
_LITTLE = sys.byteorder == "little"


def columns_name(index_name: str) -> str:
    """Where an index file keeps its columns: ``NAME.json`` -> ``NAME.columns``, beside it."""
    return index_name.removesuffix(".json") + COLUMNS_SUFFIX


def _little_endian(values: array) -> bytes:
    if not _LITTLE:
        values.byteswap()
    return values.tobytes()


def encode_columns(shards: Sequence[ShardEntry], pattern: str | None) -> bytes:
    """The columns file for ``shards``; names are stored only when ``pattern`` is None."""
    n, flags = len(shards), 0
    parts = [
        _little_endian(array("q", [entry.samples for entry in shards])),
        _little_endian(array("q", [entry.size for entry in shards])),
    ]
    hexes = [entry.sha256 for entry in shards]
    if any(hexes):
        flags |= FLAG_SHA256 | (FLAG_ALL_SHA256 if all(hexes) else 0)
        parts.append(_digests(hexes, shards))
    blob = b""
    if pattern is None:
        flags |= FLAG_NAMES
        encoded = [entry.name.encode("utf-8") for entry in shards]
        blob = b"".join(encoded)
        parts += [_little_endian(array("Q", accumulate(map(len, encoded), initial=0))), blob]
    else:
        _check_pattern(pattern, shards)
    return HEADER.pack(COLUMNS_MAGIC, LAYOUT_VERSION, flags, n, len(blob)) + b"".join(parts)


def _digests(hexes: list[str], shards: Sequence[ShardEntry]) -> bytes:
    try:
        raw = b"".join(bytes.fromhex(h) if h else _NO_DIGEST for h in hexes)
        if len(raw) == 32 * len(hexes):
            return raw
    except ValueError:
        pass
    bad = next((i for i, h in enumerate(hexes) if h and not _HEX64.fullmatch(h)), 0)
    raise ValueError(f"shard {shards[bad].name!r}: sha256 {hexes[bad]!r} is not 64 hex digits")


def _check_pattern(pattern: str, shards: Sequence[ShardEntry]) -> None:
    """The names a reader will compute must be the shards': checked at both ends and PATTERN_CHECKS between
    (a full check costs ~3 us a shard; the packer and indexer derive the pattern from the names)."""
    names = BracePattern(pattern)
    if len(names) != len(shards):
        raise ValueError(f"pattern {pattern!r} names {len(names)} shards, the index has {len(shards)}")
    if not shards:
        return
    step = max(1, len(shards) // PATTERN_CHECKS)
    for i in [*range(0, len(shards), step), len(shards) - 1]:
        if names[i] != shards[i].name:
            raise ValueError(
                f"shard {i} is {shards[i].name!r}, but pattern {pattern!r} names it {names[i]!r}"
            )


class ShardColumns(Sequence[ShardEntry]):
    """A version-2 index's shards, read-only, over the columns file's bytes: ``[i]`` makes one ShardEntry;
    ``column(name)`` gives a whole column's bytes (for ``numpy.frombuffer``) and ``integers`` an array."""

    def __init__(self, data: bytes, *, pattern: str | None, source: str = "columns") -> None:
        if len(data) < HEADER.size:
            raise FormatError(f"{source}: {len(data)} bytes, shorter than the {HEADER.size}-byte header")
        magic, layout, flags, n, blob = HEADER.unpack_from(data)
        if magic != COLUMNS_MAGIC:
            raise FormatError(
                f"{source}: not a shardstream columns file (it does not start {COLUMNS_MAGIC!r})"
            )
        if layout != LAYOUT_VERSION or flags & ~(FLAG_SHA256 | FLAG_ALL_SHA256 | FLAG_NAMES):
            raise FormatError(
                f"{source}: columns layout {layout} (flags {flags}); this shardstream reads "
                f"layout {LAYOUT_VERSION}"
            )
        if bool(flags & FLAG_NAMES) == (pattern is not None):
            held = "holds" if flags & FLAG_NAMES else "lacks"
            raise FormatError(f"{source}: {held} shard names, but the index's pattern is {pattern!r}")
        self.data, self.flags, self.source, self.pattern = data, flags, source, pattern
        self._sections: dict[str, tuple[int, int]] = {}
        at = HEADER.size
        sizes = (
            ("samples", 8 * n, True),
            ("bytes", 8 * n, True),
            ("sha256", 32 * n, flags & FLAG_SHA256),
            ("offsets", 8 * (n + 1), flags & FLAG_NAMES),
            ("names", blob, blob),
        )
        for name, size, present in sizes:
            if present:
                self._sections[name] = (at, at + size)
                at += size
        if at != len(data):
            raise FormatError(
                f"{source}: {len(data)} bytes, but its header describes {at}: truncated or padded"
            )
        self._samples_at, self._bytes_at = self._sections["samples"][0], self._sections["bytes"][0]
        self._sha256_at = self._sections["sha256"][0] if flags & FLAG_SHA256 else None
        self.names: Sequence[str]
        if pattern is None:
            self.names = _ColumnNames(data, self._sections["offsets"][0], at - blob, n, source)
            offsets = self._sections["offsets"][0]
            first, last = _U64.unpack_from(data, offsets)[0], _U64.unpack_from(data, offsets + 8 * n)[0]
            if (first, last) != (0, blob):
                raise FormatError(f"{source}: name offsets {first}..{last} do not span the {blob}-byte names")
        else:
            self.names = BracePattern(pattern)
            if len(self.names) != n:
                raise FormatError(f"{source}: {n} shards, but pattern {pattern!r} names {len(self.names)}")
        self._n = n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        i = operator.index(i)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(f"shard {i} out of range for {self._n} shards")
        samples = _I64.unpack_from(self.data, self._samples_at + 8 * i)[0]
        size = _I64.unpack_from(self.data, self._bytes_at + 8 * i)[0]
        return ShardEntry(self.names[i], samples, size, self._sha256(i))

    def __iter__(self) -> Iterator[ShardEntry]:
        for i in range(self._n):
            yield self[i]

    def _sha256(self, i: int) -> str:
        if self._sha256_at is None:
            return ""
        digest = self.data[self._sha256_at + 32 * i : self._sha256_at + 32 * i + 32]
        return "" if digest == _NO_DIGEST else digest.hex()

    @property
    def all_sha256(self) -> bool:
        """Whether every shard has its sha256."""
        return self.flags & (FLAG_SHA256 | FLAG_ALL_SHA256) == FLAG_SHA256 | FLAG_ALL_SHA256

    def column(self, name: str) -> memoryview:
        """The raw little-endian bytes of "samples", "bytes" (int64) or "sha256" (32 bytes a shard; empty
        when no shard has one), without a copy."""
        start, end = self._sections.get(name, (0, 0))
        return memoryview(self.data)[start:end]

    def integers(self, name: str) -> array:
        """The "samples" or "bytes" column as an int64 array (one copy, 8 bytes a shard)."""
        values = array("q")
        values.frombytes(self.column(name))
        if not _LITTLE:
            values.byteswap()
        return values

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=False))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ShardColumns({self._n} shards from {self.source})"


class _ColumnNames(Sequence[str]):
    """Shard names from the offsets and blob sections; pickles only those (a DataLoader worker's copy)."""

    def __init__(self, data: bytes, offsets_at: int, blob_at: int, n: int, source: str) -> None:
        self.data, self.offsets_at, self.blob_at, self.n, self.source = data, offsets_at, blob_at, n, source

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        i = operator.index(i)
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(f"shard {i} out of range for {self.n} shards")
        start, end = _U64_PAIR.unpack_from(self.data, self.offsets_at + 8 * i)
        if not start <= end <= len(self.data) - self.blob_at:
            raise FormatError(f"{self.source}: shard {i}'s name offsets {start}..{end} are out of order")
        try:
            return self.data[self.blob_at + start : self.blob_at + end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(f"{self.source}: shard {i}'s name is not UTF-8 ({exc})") from exc

    def __reduce__(self) -> tuple[Any, ...]:
        # Offsets and blob are the file's last sections: pickle them, not the columns before them.
        start = self.offsets_at
        return (_ColumnNames, (self.data[start:], 0, self.blob_at - start, self.n, self.source))
