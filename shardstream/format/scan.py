"""A shard's sample map from its headers alone: offsets, keys and field sizes, seeking over member data.

The reader (``tarread``) copies every member; indexing needs only the 512-byte headers, so this walks
them through one reused buffer and jumps over member data: a seek on a local file, a read-and-drop on a
stream (HTTP, fsspec), or a read-and-hash when the shard's sha256 is asked for (that costs a full read).
Damage ends the walk and is returned with its offset, never raised: one bad shard must not stop an index.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from ..buffers import read_into
from ..errors import ShardReadError
from ..io.localfiles import open_regular
from .constants import BLOCK
from .keys import split_member_name
from .tarmember import (
    GLOBAL_PAX,
    LONGNAME,
    PAX,
    REGULAR,
    ZERO_BLOCK,
    checksum_matches,
    header_name,
    long_name,
    number,
    pax_records,
    pax_size,
)

try:  # a member's headers (plain, or pax + plain as webdataset's writer leaves) in one C call
    from ._tarscan import member_at as _member_at
except ImportError:
    _member_at = None

_WINDOW = 1 << 20
_AFTER_JUMP = 64 << 10  # past a large member, read little: the next header is all that is needed


@dataclass
class ShardScan:
    """What one scan found. ``offsets`` has samples + 1 entries: sample i spans [offsets[i], offsets[i+1]).
    ``members``: with ``scan_shard(member=EXT)``, each sample's first member of that extension, its bytes
    (None: the sample has none); else None."""

    offsets: array = field(default_factory=lambda: array("Q"))
    keys: list[str] = field(default_factory=list)
    fields: dict[str, list[int]] = field(default_factory=dict)  # extension -> [members, bytes]
    size: int = 0
    sha256: str = ""
    damage: str | None = None
    damage_offset: int | None = None
    members: list[bytes | None] | None = None

    @property
    def samples(self) -> int:
        return max(0, len(self.offsets) - 1)


class _Blocks:
    """Absolute-offset access to a stream through one buffer: ``at(offset, n)`` -> position in ``buf``."""

    def __init__(self, stream: BinaryIO, *, seek: bool, digest: Any) -> None:
        self.stream, self.seek, self.digest = stream, seek, digest
        self.buf = bytearray(_WINDOW)
        self.view = memoryview(self.buf)
        self.base = self.end = 0  # buf[0:end] holds the stream's bytes [base, base + end)
        self.read_to = 0  # the stream's own position

    def at(self, offset: int, n: int) -> int:
        """Where bytes [offset, offset + n) sit in ``buf``: -1 if the stream ends before offset + n, -2 if
        it ends before ``offset`` itself (inside the member data the caller stepped over)."""
        pos = offset - self.base
        if pos >= 0 and pos + n <= self.end:
            return pos
        keep = self.end - pos if 0 <= pos < self.end else 0
        jumped = False
        if keep:
            self.buf[:keep] = self.buf[pos : self.end]
        elif offset > self.read_to:
            jumped = offset - self.read_to > _AFTER_JUMP
            if not self._skip_to(offset):
                return -2
        self.base, self.end = offset, keep
        want = max(n, _AFTER_JUMP if jumped and self.seek else _WINDOW)
        while self.end < want:
            if self.end == len(self.buf):  # grown by doubling as bytes come, never to a declared size
                self.view.release()
                self.buf.extend(bytes(min(want, 2 * len(self.buf)) - len(self.buf)))
                self.view = memoryview(self.buf)
            got = self._read(self.end, min(want, len(self.buf)))
            if not got:
                break
            self.end += got
        return 0 if self.end >= n else -1

    def _read(self, start: int, stop: int) -> int:
        """Read into ``buf[start:stop]``; what came is hashed (for the checksum) and counted."""
        got = read_into(self.stream, self.view[start:stop])
        if got and self.digest is not None:
            self.digest.update(self.view[start : start + got])
        self.read_to += got
        return got

    def _skip_to(self, offset: int) -> bool:
        if self.seek:
            self.stream.seek(offset)
            self.read_to = offset
            return True
        while self.read_to < offset:
            if not self._read(0, min(len(self.buf), offset - self.read_to)):
                return False
        return True

    def drain(self) -> int:
        """Read the rest (for the digest) and return the stream's length."""
        while self._read(0, len(self.buf)):
            pass
        return self.read_to


def scan_shard(
    stream: BinaryIO, *, url: str, checksum: bool = False, size: int | None = None, member: str | None = None
) -> ShardScan:
    """Walk the headers of the tar in ``stream`` (positioned at byte 0); never raises for damage.

    ``size`` (a local file's length) lets the walk seek instead of read. With ``checksum`` every byte is
    read and hashed. A sample is complete at its last regular member's end; on damage, the samples complete
    before it are kept and the sample in progress is dropped (its members uncounted): the one a cut member
    belongs to, or, when a header itself is damaged (its key unknown), the one before it. ``member`` (an
    extension, e.g. ``json``): that member's bytes are read too, one a sample (``ShardScan.members``);
    every other member is still stepped over.
    """
    digest = hashlib.sha256() if checksum else None
    limit = size if not checksum else None  # a known length: member data can be stepped over by seeking
    blocks = _Blocks(stream, seek=limit is not None, digest=digest)
    walk = _Walk(blocks, url, limit, member)
    scan = walk.scan
    try:
        walk.run()
        scan.size = limit if limit is not None else blocks.drain()
    except (ShardReadError, OSError) as exc:
        walk.damaged(exc)
        scan.size = size if size is not None else blocks.read_to
    if digest is not None and scan.damage is None:
        scan.sha256 = digest.hexdigest()
    return scan


Member = tuple[int, int, str, str, int]  # where its first header starts, size, key, extension, data offset


class _Walk:
    """One shard's header walk: what it has found (``scan``) and its state between headers (pending pax
    records and long name, the sample in progress, which damage undoes)."""

    def __init__(self, blocks: _Blocks, url: str, limit: int | None, member: str | None = None) -> None:
        self.blocks, self.url, self.limit, self.member = blocks, url, limit, member
        self.scan = ShardScan(members=None if member is None else [])
        self.key: str | None = None
        self.in_sample: list[tuple[str, int]] = []  # the current sample's (extension, size), undone on damage
        self.sample_end = 0  # where the current sample's last member ends
        self.first_header: int | None = None  # of the member being read: pax and long-name headers come first
        self.pax: dict[str, str] = {}
        self.long_name: str | None = None
        self.offset = self.member_header = 0

    def run(self) -> None:
        """Every member, to the end-of-archive blocks (or a stream that ends where a header would start)."""
        while (member := self._next_member()) is not None:
            self._add(*member)
        if self.key is not None:
            self.scan.offsets.append(self.sample_end)

    def _next_member(self) -> Member | None:
        """The next regular member; None at the archive's end. Other headers (pax, long names,
        directories, links) are read past, the extended ones kept for the member they describe."""
        blocks, url = self.blocks, self.url
        while True:
            offset = self.offset
            pos = blocks.at(offset, BLOCK)
            if pos < 0:
                if pos == -2:
                    reason = (
                        f"truncated tar: the stream ends before byte {offset}, inside the data of the member"
                    )
                    raise ShardReadError(f"{reason} whose header is here", url=url, offset=self.member_header)
                if blocks.end:
                    raise ShardReadError("truncated tar header", url=url, offset=offset)
                return None  # a tar without the end-of-archive blocks, as some writers leave
            if _member_at is not None and not self.pax and self.long_name is None:
                found = _member_at(blocks.buf, pos)
                if found is not None:
                    member_size, name_key, ext, data_at = found
                    return offset, member_size, name_key, ext, data_at + offset - pos
            header = bytes(blocks.view[pos : pos + BLOCK])
            if not checksum_matches(header):
                if header == ZERO_BLOCK:
                    return None
                raise ShardReadError("corrupt tar header (checksum mismatch)", url=url, offset=offset)
            starts_at = offset if self.first_header is None else self.first_header
            member_size = self._size(header, starts_at)
            typeflag = header[156]
            if typeflag in REGULAR:
                name = (
                    self.long_name
                    if self.long_name is not None
                    else self.pax.get("path") or header_name(header)
                )
                self.pax, self.long_name, self.first_header = {}, None, None
                name_key, ext = split_member_name(name)
                return starts_at, member_size, name_key, ext, offset + BLOCK
            self._extended(typeflag, member_size, starts_at)

    def _size(self, header: bytes, starts_at: int) -> int:
        if "size" not in self.pax:
            return number(header[124:136], self.url, self.offset)
        return pax_size(self.pax["size"], self.url, starts_at)

    def _extended(self, typeflag: int, member_size: int, starts_at: int) -> None:
        """A header that is no member: pax records and a long name are kept for the next member."""
        offset, url = self.offset, self.url
        data_at = offset + BLOCK
        if typeflag in (PAX, LONGNAME):
            at = self.blocks.at(data_at, member_size)
            if at < 0:
                raise ShardReadError("truncated tar: a pax or long-name header", url=url, offset=offset)
            data = bytes(self.blocks.view[at : at + member_size])
            if typeflag == PAX:
                try:
                    self.pax = pax_records(data)
                except ValueError as exc:
                    raise ShardReadError(f"corrupt pax header ({exc})", url=url, offset=offset) from exc
            else:
                self.long_name = long_name(data)  # to its first NUL, as GNU tar and the reader end it
            self.first_header = starts_at
        elif typeflag != GLOBAL_PAX:  # directories, links: not sample members
            self.first_header, self.pax, self.long_name = None, {}, None
        self.offset = data_at + member_size + (-member_size % BLOCK)

    def _add(self, starts_at: int, member_size: int, name_key: str, ext: str, data_at: int) -> None:
        """Count a regular member into its sample (a new one when its key changes)."""
        scan, offset = self.scan, self.offset
        end = data_at + member_size + (-member_size % BLOCK)
        if name_key != self.key:
            scan.offsets.append(starts_at if self.key is None else self.sample_end)
            scan.keys.append(name_key)
            self.key = name_key
            self.in_sample.clear()
            if scan.members is not None:
                scan.members.append(None)
        self.in_sample.append((ext, member_size))
        counts = scan.fields.get(ext)
        if counts is None:
            scan.fields[ext] = [1, member_size]
        else:
            counts[0] += 1
            counts[1] += member_size
        if (
            self.limit is not None and end > self.limit
        ):  # counted first: its sample, not the one before, is cut
            needs, remain = end - offset, self.limit - offset
            raise ShardReadError(
                f"truncated tar: member needs {needs} bytes with its header, {remain} remain",
                url=self.url,
                offset=offset,
            )
        if ext == self.member and scan.members is not None and scan.members[-1] is None:
            scan.members[-1] = self._data(data_at, member_size)
        self.member_header = starts_at
        self.sample_end = self.offset = end

    def _data(self, data_at: int, member_size: int) -> bytes:
        """A member's bytes (the one the caller asked for by extension)."""
        at = self.blocks.at(data_at, member_size)
        if at < 0:
            raise ShardReadError("truncated tar: inside a member's data", url=self.url, offset=self.offset)
        return bytes(self.blocks.view[at : at + member_size])

    def damaged(self, exc: ShardReadError | OSError) -> None:
        """Record the damage; the sample in progress is dropped, those before it are whole."""
        scan = self.scan
        if isinstance(exc, ShardReadError):
            scan.damage, scan.damage_offset = exc.message, exc.offset
        else:
            scan.damage, scan.damage_offset = f"read failed: {exc.strerror or exc}", self.offset
        if scan.keys:
            scan.keys.pop()
            del scan.offsets[len(scan.keys) + 1 if scan.keys else 0 :]
            if scan.members is not None:
                del scan.members[len(scan.keys) :]
            for ext, member_size in self.in_sample:
                scan.fields[ext][0] -= 1
                scan.fields[ext][1] -= member_size
                if not scan.fields[ext][0]:
                    del scan.fields[ext]


def scan_file(
    path: str | os.PathLike[str], *, checksum: bool = False, url: str | None = None, member: str | None = None
) -> ShardScan:
    """Scan a local tar by seeking over member data (``member``: as ``scan_shard`` takes it)."""
    shown = url or os.fspath(path)
    try:
        handle = open_regular(path, buffering=0)  # closed below; our own buffer does the reads
    except OSError as exc:
        return ShardScan(damage=f"cannot open: {exc.strerror or exc}", damage_offset=0)
    with handle:
        size = os.fstat(handle.fileno()).st_size
        return scan_shard(handle, url=shown, checksum=checksum, size=size, member=member)
