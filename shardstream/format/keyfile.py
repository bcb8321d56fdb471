"""The sorted key file: lookup by sample key in one block read, without holding the keys in memory.

``shardstream-keys`` holds one line per sample, ``key NUL shard(8 hex) sample(8 hex) LF``, sorted as bytes
(so by key, then by place); ``shardstream-keys.idx`` holds the first key and byte offset of each block of
about 64 KiB, and a last line with an empty key and the data's length. A lookup bisects the block index
in memory (a few bytes per block) and reads one block: one seek locally, one Range request over HTTP.
Equal keys never straddle two blocks, so the first place of a repeated key is always found. Keys holding
NUL or LF cannot be written (no tar name holds NUL; a foreign tar might hold LF) and are counted instead.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import FormatError
from ..io.publish import Publishing, fsync_dir

BLOCK_TARGET = 64 << 10
_PLACE = 17  # 8 + 8 hex digits and the LF
IDX_SUFFIX = ".idx"


def key_line(key: str, shard: int, sample: int) -> bytes | None:
    """One line of a key file (or of a shard's sorted key run); None for a key that cannot be written."""
    raw = key.encode("utf-8", "surrogateescape")
    if b"\0" in raw or b"\n" in raw:
        return None
    return b"%s\0%08x%08x\n" % (raw, shard, sample)


class KeyFileWriter:
    """Takes sorted lines; publishes data and block index by temp file + rename when the block closes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines = 0
        self.repeated = 0  # lines whose key equals the line before: a key held by more than one sample
        self._files = (Publishing(path), Publishing(self.idx_path))  # data, block index
        self._data, self._idx = (file.handle for file in self._files)
        self._offset = 0
        self._block_start = -1
        self._last_key: bytes | None = None

    @property
    def idx_path(self) -> Path:
        return self.path.with_name(self.path.name + IDX_SUFFIX)

    def __enter__(self) -> KeyFileWriter:
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()

    def add_all(self, lines: Iterable[bytes]) -> None:
        """Append sorted lines; the hot loop of an index's commit, so its state lives in locals."""
        last, offset, block_start, repeated = self._last_key, self._offset, self._block_start, self.repeated
        target = BLOCK_TARGET
        out: list[bytes] = []
        count = 0
        for line in lines:
            key = line[: -_PLACE - 1]
            if key == last:
                repeated += 1
            else:
                if last is not None and key < last:
                    raise FormatError(f"{self.path}: key lines out of order ({last!r} before {key!r})")
                if offset - block_start >= target or block_start < 0:
                    self._idx.write(b"%s\0%016x\n" % (key, offset))
                    block_start = offset
                last = key
            out.append(line)
            offset += len(line)
            count += 1
            if len(out) >= 4096:
                self._data.write(b"".join(out))
                out.clear()
        self._data.write(b"".join(out))
        self._last_key, self._offset, self._block_start, self.repeated = last, offset, block_start, repeated
        self.lines += count

    def add(self, line: bytes) -> None:
        self.add_all((line,))

    def close(self) -> None:
        self._idx.write(b"\0%016x\n" % self._offset)
        for file in self._files:
            file.commit(sync_folder=False)
        fsync_dir(self.path.parent)

    def abort(self) -> None:
        for file in self._files:
            file.abort()


class KeyFile:
    """Lookup in a key file through ``read_range(start, end) -> bytes`` over its data."""

    def __init__(self, idx: bytes, read_range: Callable[[int, int], bytes], *, source: str = "keys") -> None:
        self.read_range = read_range
        self.source = source
        lines = idx.split(b"\n")
        if len(lines) < 2 or lines[-1] != b"" or not lines[-2].startswith(b"\0"):
            raise FormatError(f"{source}{IDX_SUFFIX}: not a key block index (no closing line)")
        try:
            self.first_keys = [line[:-17] for line in lines[:-2]]
            self.starts = [int(line[-16:], 16) for line in lines[:-1]]
        except ValueError as exc:
            raise FormatError(f"{source}{IDX_SUFFIX}: malformed line ({exc})") from exc
        # Blocks follow one another from byte 0. (A block's end past the data, 2^40 say, is caught by the
        # read: read_range never returns, or holds, more than the file has, and says it ended early.)
        if self.starts[0] != 0 or any(b <= a for a, b in zip(self.starts, self.starts[1:], strict=False)):
            raise FormatError(
                f"{source}{IDX_SUFFIX}: block offsets do not increase from 0: a damaged key file; run "
                "`shardstream index` again"
            )

    @property
    def length(self) -> int:
        return self.starts[-1]

    def lookup(self, key: str) -> tuple[int, int] | None:
        """(shard, sample) of the first sample holding ``key``, or None."""
        raw = key.encode("utf-8", "surrogateescape")
        block = bisect.bisect_right(self.first_keys, raw) - 1
        if block < 0 or b"\0" in raw or b"\n" in raw:
            return None
        data = b"\n" + self.read_range(self.starts[block], self.starts[block + 1])
        at = data.find(b"\n" + raw + b"\0")
        if at < 0:
            return None
        place = data[at + len(raw) + 2 : at + len(raw) + 18]
        if len(place) != 16:
            raise FormatError(f"{self.source}: a line cut short in block {block}")
        return int(place[:8], 16), int(place[8:], 16)
