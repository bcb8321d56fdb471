"""One tar shard being written: checks the size cap before appending, publishes by fsync + rename."""

from __future__ import annotations

import hashlib
from array import array
from pathlib import Path
from types import TracebackType

from shardstream.format import (
    ShardEntry,
    encode_offsets,
    end_of_archive,
    member_header,
    member_name,
    offsets_name,
    sample_columns_name,
    write_atomic,
)
from shardstream.format.constants import END_OF_ARCHIVE
from shardstream.format.samplecols import COST, encode_sample_columns
from shardstream.format.tails import column_tail
from shardstream.format.tarheader import padded
from shardstream.io.publish import Publishing

from .sample import Sample

_ZEROS = b"\0" * 512


def encode_sample(sample: Sample) -> list[bytes]:
    """The sample as tar bytes: its members contiguous, in the order given."""
    chunks: list[bytes] = []
    for ext, data in sample.members:
        chunks.append(member_header(member_name(sample.key, ext), len(data)))
        chunks.append(data)
        pad = padded(len(data))
        if pad:
            chunks.append(_ZEROS[:pad])
    return chunks


class TarShardWriter:
    """Writes one shard to a temp file; ``close()`` publishes it and its offsets sidecar (and, with
    ``costs``, its ``.cols`` file of each sample's cost)."""

    def __init__(
        self, path: Path, *, max_size: int | None, max_count: int | None, costs: bool = False
    ) -> None:
        self.path = path
        self.max_size = max_size
        self.max_count = max_count
        self.count = 0
        self.size = 0
        # Per-shard bookkeeping only: memory is bounded by the shard, never by the dataset.
        self.offsets = array("q")
        self.keys: dict[str, int] = {}  # key -> sample number in this shard, for the key file
        self.costs = array("Q") if costs else None
        self._file = Publishing(path, buffering=1 << 20)
        self._handle = self._file.handle
        self._hash = hashlib.sha256()

    def fits(self, nbytes: int) -> bool:
        """Whether a sample of ``nbytes`` tar bytes can join without breaking a limit."""
        if self.max_count is not None and self.count >= self.max_count:
            return False
        return self.max_size is None or self.size + nbytes + END_OF_ARCHIVE <= self.max_size

    def add(self, key: str, chunks: list[bytes], nbytes: int, cost: int = 0) -> None:
        self.offsets.append(self.size)
        if self.costs is not None:
            self.costs.append(cost)
        self.keys[key] = self.count
        data = b"".join(chunks)
        self._handle.write(data)
        self._hash.update(data)
        self.size += nbytes
        self.count += 1

    def close(self) -> ShardEntry:
        tail = end_of_archive()
        self._handle.write(tail)
        self._hash.update(tail)
        self.offsets.append(self.size)
        self.size += len(tail)
        self._handle.flush()
        # Sidecars first: a shard under its final name always has its offsets (and columns) beside it.
        if self.costs is not None:
            columns = encode_sample_columns({COST: self.costs}, {COST: "u8"})
            write_atomic(self.path.with_name(sample_columns_name(self.path.name)), columns)
        write_atomic(self.path.with_name(offsets_name(self.path.name)), encode_offsets(self.offsets))
        self._file.commit()
        return ShardEntry(self.path.name, self.count, self.size, self._hash.hexdigest())

    @property
    def cost_sum(self) -> int:
        return sum(self.costs) if self.costs is not None else 0

    @property
    def cost_tail(self) -> list[int]:
        """The shard's largest costs, largest first (``format/tails.py``): the index's tail for it."""
        return column_tail(self.costs) if self.costs is not None else []

    def abort(self) -> None:
        self._file.abort()

    def __enter__(self) -> TarShardWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is not None:
            self.abort()
