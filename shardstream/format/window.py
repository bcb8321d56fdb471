"""A reused read buffer over a stream: refilled by readinto, sliced into bytes; fewer copies, no page faults.

The buffer comes from the shared pool (``shardstream.buffers``) and goes back to it when the shard is
done, so the next shard's window finds its pages already mapped.
"""

from __future__ import annotations

import mmap
import os
from typing import BinaryIO

from ..buffers import CHUNK, CHUNKS, anonymous_map, read_into
from ..io.iostats import IO

TAKE_PIECE = 16 << 20  # the most one read of a large member asks for: memory follows the bytes that come


class ReadWindow:
    """``buf[pos:end]`` holds the stream's next bytes; readers slice ``buf`` and move ``pos`` themselves."""

    __slots__ = ("buf", "data", "end", "pos", "stream", "view")

    def __init__(self, stream: BinaryIO, capacity: int = CHUNK) -> None:
        self.stream = stream
        self.buf = CHUNKS.take() if capacity == CHUNKS.size else anonymous_map(capacity)
        self.data = self.buf  # what members are sliced from: bytes copies out of the reused buffer
        self.view = memoryview(self.buf)
        self.pos = 0
        self.end = 0

    def release(self) -> None:
        """Hand the buffer on to a later window; this one is done (its stream is the caller's to close)."""
        self.view.release()
        CHUNKS.give(self.buf)
        self.pos = self.end = 0

    def fill(self, need: int) -> int:
        """Make ``need`` bytes (at most the capacity) available at ``pos``; return how many are."""
        have = self.end - self.pos
        if have >= need:
            return have
        if self.pos:
            self.buf.move(0, self.pos, have)
            self.pos, self.end = 0, have
        while self.end - self.pos < need:
            count = read_into(self.stream, self.view[self.end :])
            if not count:
                break
            self.end += count
        return self.end - self.pos

    def take(self, size: int) -> bytes:
        """The next ``size`` bytes, or fewer at the end of the stream."""
        if size > len(self.buf):  # larger than the buffer: around it
            parts = [self.buf[self.pos : self.end]]
            have = len(parts[0])
            self.pos = self.end = 0
            while have < size:  # in pieces: a header may declare far more than the stream holds
                more = self.stream.read(min(size - have, TAKE_PIECE))
                if not more:
                    break
                parts.append(more)
                have += len(more)
            return b"".join(parts)
        size = min(size, self.fill(size))
        data = self.buf[self.pos : self.pos + size]
        self.pos += size
        return data


class ShardMapping(mmap.mmap):
    """A shard file mapped read-only, knowing its file: a member (a memoryview whose ``obj`` is this) can
    be sent to another process as (path, identity, start, end) and mapped there, not copied."""

    path: str
    identity: tuple[int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns: the same file, unchanged

    @classmethod
    def of(cls, fd: int, path: str) -> ShardMapping:
        info = os.fstat(fd)
        mapping = cls(fd, 0, access=mmap.ACCESS_READ)
        mapping.path = path
        mapping.identity = cls.identity_of(info)
        return mapping

    @staticmethod
    def identity_of(info: os.stat_result) -> tuple[int, int, int, int]:
        """What says a file is the one mapped, unchanged: the inode, and the size and mtime that a rewrite
        in place (same inode) changes."""
        return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


class SpanWindow:
    """Bytes already in memory, ``buf[pos:end]``: nothing more to read, so a span cut short reads as a
    truncated tar. Members are sliced from ``data`` (bytes from an mmap or bytes buffer, views from a
    memoryview); as given, one sample's bytes read by one positioned read into a reused buffer."""

    __slots__ = ("buf", "data", "end", "pos", "stream")

    def __init__(self, buf: mmap.mmap | bytes, end: int) -> None:
        self.stream = None
        self.buf = self.data = buf
        self.pos = 0
        self.end = end

    def release(self) -> None:
        self.buf = self.data = None  # type: ignore[assignment]  # the buffer is its owner's (or the members')

    def fill(self, need: int) -> int:
        return self.end - self.pos

    def take(self, size: int) -> bytes:
        stop = min(self.pos + size, self.end)
        data = self.buf[self.pos : stop]
        self.pos = stop
        return data


class MappedWindow(SpanWindow):
    """A whole shard mapped read-only: headers are sliced as bytes, members as read-only memoryviews into
    the mapping (no copy, no allocation per member). The mapping is unmapped once nothing refers to it:
    neither this window nor any member handed out."""

    __slots__ = ()

    def __init__(self, mapped: ShardMapping, start: int = 0) -> None:
        super().__init__(mapped, len(mapped))
        self.data = memoryview(mapped)
        self.pos = start

    @classmethod
    def of(cls, stream: BinaryIO, start: int) -> MappedWindow | None:
        """The window over ``stream``'s file, when it is a plain non-empty file; else None (copy instead)."""
        try:
            mapping = ShardMapping.of(stream.fileno(), os.path.abspath(stream.name))  # type: ignore[attr-defined]
        except (AttributeError, OSError, ValueError, TypeError):  # no descriptor or name (HTTP, gzip), empty
            return None
        if len(mapping) <= start:
            return None
        IO.bytes += len(mapping) - start  # read by the kernel as members are touched: counted once, here
        return cls(mapping, start)
