"""Tar members from a byte stream, by hand: 512-byte header parsing without tarfile's per-member cost.

Reads ustar, pax ('x'/'g') and GNU long names ('L'); yields regular files only, with the byte offset of
each member's first header so callers can map members back to the offsets sidecar.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO, NamedTuple
from zlib import adler32

from ..errors import ShardReadError
from .constants import BLOCK


class TarMember(NamedTuple):
    name: str
    data: bytes
    offset: int  # of the member's first header block (pax/longname included)
    end: int  # just past its padded data: where the next member's first header starts


def _number(field: bytes, url: str, offset: int) -> int:
    if field[:1] in (b"\x80", b"\xff"):  # GNU base-256 for sizes past 8 GiB
        value = int.from_bytes(field[1:], "big")
        return -value if field[:1] == b"\xff" else value
    text = field.split(b"\0", 1)[0].strip()
    try:
        return int(text, 8) if text else 0
    except ValueError as exc:
        raise ShardReadError(f"corrupt tar header (bad number {text!r})", url=url, offset=offset) from exc


def _pax_records(data: bytes) -> dict[str, str]:
    records = {}
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos)
        if space < 0:
            break
        length = int(data[pos:space])
        if length <= 0:
            break
        key, _, value = data[space + 1 : pos + length - 1].partition(b"=")
        records[key.decode("utf-8", "replace")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return records


_CHUNK = 1 << 20
_ZERO_BLOCK = bytes(BLOCK)


class _Chunks:
    """Reads the stream in large chunks, so each member costs slicing, not two read() calls."""

    __slots__ = ("buf", "pos", "stream")

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.buf = b""
        self.pos = 0

    def take(self, size: int) -> bytes:
        end = self.pos + size
        if end <= len(self.buf):
            data = self.buf[self.pos : end]
            self.pos = end
            return data
        parts = [self.buf[self.pos :]]
        have = len(parts[0])
        while have < size:
            more = self.stream.read(max(_CHUNK, size - have))
            if not more:
                break
            parts.append(more)
            have += len(more)
        self.buf = b"".join(parts)
        self.pos = min(size, len(self.buf))
        return self.buf[: self.pos]


def _header_size(header: bytes, url: str, offset: int) -> int:
    try:
        return int(header[124:135], 8)  # the common "%011o\0" form, without building a split list
    except ValueError:
        return _number(header[124:136], url, offset)


def iter_members(stream: BinaryIO, *, url: str = "<stream>", start: int = 0) -> Iterator[TarMember]:
    """Yield regular-file members until the end-of-archive marker; raise ShardReadError on damage.

    ``start`` is the stream's position in the archive, so offsets stay true after a seek.
    """
    chunks = _Chunks(stream)
    take = chunks.take
    new_member = tuple.__new__  # a TarMember without NamedTuple's Python-level __new__: hot path
    offset = start
    long_name: str | None = None
    pax: dict[str, str] = {}
    first_header = None
    while True:
        # take(), inlined for the common case where the chunk already holds the block.
        pos = chunks.pos
        if pos + BLOCK <= len(chunks.buf):
            header = chunks.buf[pos : pos + BLOCK]
            chunks.pos = pos + BLOCK
        else:
            header = take(BLOCK)
            if len(header) < BLOCK:
                if not header:
                    return  # a tar without the end-of-archive blocks, as some writers leave
                raise ShardReadError("truncated tar header", url=url, offset=offset)
        # adler32's low half is 1 + the byte sum mod 65521: the tar checksum (a byte sum, with its own
        # field counted as spaces, 8 * 32 = 256) checked in C instead of a Python loop over 512 bytes.
        stored = header[148:156]
        expected = -(10**9)
        if stored[6] in (0, 32):  # "%06o\0 ", as GNU tar and Python's tarfile write it
            try:
                expected = int(stored[:6], 8)
            except ValueError:
                expected = _stored_checksum(stored)
        else:
            expected = _stored_checksum(stored)
        if (adler32(header) & 0xFFFF) + 255 - sum(stored) - expected not in _SAME:
            if header == _ZERO_BLOCK:
                return
            raise ShardReadError("corrupt tar header (checksum mismatch)", url=url, offset=offset)
        if first_header is None:
            first_header = offset
        size = int(pax["size"]) if "size" in pax else _header_size(header, url, offset)
        typeflag = header[156]
        padded_size = size + (-size % BLOCK)
        pos = chunks.pos
        if pos + padded_size <= len(chunks.buf):
            # One copy, of the data alone; the padding is stepped over.
            data = chunks.buf[pos : pos + size]
            chunks.pos = pos + padded_size
            payload = None
        else:
            payload = take(padded_size)
            data = payload[:size] if padded_size != size else payload
        if payload is not None and len(payload) < padded_size:
            raw_name = header[0:100].split(b"\0", 1)[0].decode("utf-8", "replace")
            raise ShardReadError(
                f"truncated tar: member needs {padded_size} bytes with padding, {len(payload)} remain",
                url=url,
                member=raw_name,
                offset=offset,
            )
        offset += BLOCK + padded_size
        if typeflag not in _REGULAR:
            if typeflag == _PAX:
                pax = _pax_records(data)
            elif typeflag == _LONGNAME:
                long_name = data.rstrip(b"\0").decode("utf-8", "surrogateescape")
            elif typeflag != _GLOBAL_PAX:
                first_header, long_name, pax = None, None, {}  # directories, links: not sample members
            continue
        if long_name is not None:
            name = long_name
        elif "path" in pax:
            name = pax["path"]
        else:
            end = header.find(0, 0, 100)
            name = header[: end if end >= 0 else 100].decode("utf-8", "surrogateescape")
            if header[345] and header[257:262] == b"ustar":
                prefix = header[345:500].split(b"\0", 1)[0]
                name = prefix.decode("utf-8", "surrogateescape") + "/" + name
        yield new_member(TarMember, (name, data, first_header, offset))
        if pax or long_name is not None:
            long_name, pax = None, {}
        first_header = None


_REGULAR = frozenset(b"0\x007")
_PAX, _GLOBAL_PAX, _LONGNAME = ord("x"), ord("g"), ord("L")


_SAME = frozenset(65521 * k for k in range(-3, 4))  # equal modulo 65521; a byte sum stays < 3 * 65521


def _stored_checksum(field: bytes) -> int:
    """The checksum field in any of its spellings ("%07o\0", " %05o\0 ", ...); -10^9 if unreadable."""
    try:
        return int(field.split(b"\0", 1)[0], 8)
    except ValueError:
        return -(10**9)
