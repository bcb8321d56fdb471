"""A reused read buffer over a stream: refilled by readinto, sliced into bytes; fewer copies, no page faults.

One buffer, rather than a fresh 1 MiB bytes object per read, keeps the allocator from mapping new pages
for every chunk (page faults were a third of the time per sample). An anonymous memory map rather than
a bytearray because slicing a map gives bytes in one copy, with no memoryview in between.
"""

from __future__ import annotations

import io
import mmap
from typing import BinaryIO

CHUNK = 1 << 20
# Buffers of finished windows, for the next ones: a fresh map costs a page fault per 4 KiB on first use,
# which was most of the time spent opening a small shard.
_SPARE: list[mmap.mmap] = []
_SPARE_MAX = 4


class ReadWindow:
    """``buf[pos:end]`` holds the stream's next bytes; readers slice ``buf`` and move ``pos`` themselves."""

    __slots__ = ("buf", "end", "pos", "stream", "view")

    def __init__(self, stream: BinaryIO, capacity: int = CHUNK) -> None:
        self.stream = stream
        try:
            self.buf = _SPARE.pop() if capacity == CHUNK else _anonymous_map(capacity)
        except IndexError:
            self.buf = _anonymous_map(capacity)
        self.view = memoryview(self.buf)
        self.pos = 0
        self.end = 0

    def release(self) -> None:
        """Hand the buffer on to a later window; this one is done (its stream is the caller's to close)."""
        self.view.release()
        if len(self.buf) == CHUNK and len(_SPARE) < _SPARE_MAX:
            _SPARE.append(self.buf)
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
            count = _readinto(self.stream, self.view[self.end :])
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
            while have < size:
                more = self.stream.read(size - have)
                if not more:
                    break
                parts.append(more)
                have += len(more)
            return b"".join(parts)
        size = min(size, self.fill(size))
        data = self.buf[self.pos : self.pos + size]
        self.pos += size
        return data


def _anonymous_map(size: int) -> mmap.mmap:
    # Private, not the default shared: a forked DataLoader worker must not write into its parent's buffer.
    if hasattr(mmap, "MAP_PRIVATE"):
        return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return mmap.mmap(-1, size)  # Windows: no fork


def _readinto(stream: BinaryIO, view: memoryview) -> int:
    # Only a stream without readinto falls back to read(): an error raised *inside* readinto is the
    # stream's to report, and retrying through read() could wait on data that will never come.
    readinto = getattr(stream, "readinto", None)
    if readinto is not None and getattr(type(stream), "readinto", None) is not io.RawIOBase.readinto:
        return readinto(view)
    data = stream.read(len(view))
    view[: len(data)] = data
    return len(data)
