"""Tar members from a byte stream, by hand: 512-byte header parsing without tarfile's per-member cost.

Reads ustar, pax ('x'/'g') and GNU long names ('L'); yields regular files only, with the byte offset of
each member's first header so callers can map members back to the offsets sidecar.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO, NamedTuple

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


def _checksum_ok(header: bytes) -> bool:
    stored = header[148:156].split(b"\0", 1)[0].strip()
    try:
        expected = int(stored, 8)
    except ValueError:
        return False
    computed = sum(header[:148]) + 256 + sum(header[156:])
    return computed == expected


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


def _read_exact(stream: BinaryIO, size: int) -> bytes:
    data = stream.read(size)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = stream.read(size - got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def iter_members(stream: BinaryIO, *, url: str = "<stream>", start: int = 0) -> Iterator[TarMember]:
    """Yield regular-file members until the end-of-archive marker; raise ShardReadError on damage.

    ``start`` is the stream's position in the archive, so offsets stay true after a seek.
    """
    offset = start
    long_name: str | None = None
    pax: dict[str, str] = {}
    first_header = None
    while True:
        header = _read_exact(stream, BLOCK)
        if not header or header == bytes(BLOCK):
            return  # end of archive (or a tar without the zero blocks, as some writers leave)
        if len(header) < BLOCK:
            raise ShardReadError("truncated tar header", url=url, offset=offset)
        if not _checksum_ok(header):
            raise ShardReadError("corrupt tar header (checksum mismatch)", url=url, offset=offset)
        if first_header is None:
            first_header = offset
        size = int(pax["size"]) if "size" in pax else _number(header[124:136], url, offset)
        typeflag = header[156:157]
        padded_size = size + (-size % BLOCK)
        payload = _read_exact(stream, padded_size)
        if len(payload) < padded_size:
            raw_name = header[0:100].split(b"\0", 1)[0].decode("utf-8", "replace")
            raise ShardReadError(
                f"truncated tar: member needs {padded_size} bytes with padding, {len(payload)} remain",
                url=url,
                member=raw_name,
                offset=offset,
            )
        data = payload[:size] if padded_size != size else payload
        offset += BLOCK + padded_size
        if typeflag == b"x":
            pax = _pax_records(data)
            continue
        if typeflag == b"g":
            continue
        if typeflag == b"L":
            long_name = data.rstrip(b"\0").decode("utf-8", "surrogateescape")
            continue
        if typeflag not in (b"0", b"\0", b"7"):
            first_header, long_name, pax = None, None, {}
            continue  # directories, links, devices: not sample members
        if long_name is not None:
            name = long_name
        elif "path" in pax:
            name = pax["path"]
        else:
            name = header[0:100].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            if header[257:262] == b"ustar":
                prefix = header[345:500].split(b"\0", 1)[0]
                if prefix:
                    name = prefix.decode("utf-8", "surrogateescape") + "/" + name
        yield TarMember(name, data, first_header, offset)
        first_header, long_name, pax = None, None, {}
