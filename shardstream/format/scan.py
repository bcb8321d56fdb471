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
    number,
    pax_records,
)

try:  # a member's headers (plain, or pax + plain as webdataset's writer leaves) in one C call
    from ._tarscan import member_at as _member_at
except ImportError:
    _member_at = None

_WINDOW = 1 << 20
_AFTER_JUMP = 64 << 10  # past a large member, read little: the next header is all that is needed


@dataclass
class ShardScan:
    """What one scan found. ``offsets`` has samples + 1 entries: sample i spans [offsets[i], offsets[i+1])."""

    offsets: array = field(default_factory=lambda: array("Q"))
    keys: list[str] = field(default_factory=list)
    fields: dict[str, list[int]] = field(default_factory=dict)  # extension -> [members, bytes]
    size: int = 0
    sha256: str = ""
    damage: str | None = None
    damage_offset: int | None = None

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
        if want > len(self.buf):
            self.view.release()
            self.buf.extend(bytes(want - len(self.buf)))
            self.view = memoryview(self.buf)
        while self.end < want and (got := self._read(self.end, want)):
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


def scan_shard(stream: BinaryIO, *, url: str, checksum: bool = False, size: int | None = None) -> ShardScan:
    """Walk the headers of the tar in ``stream`` (positioned at byte 0); never raises for damage.

    ``size`` (a local file's length) lets the walk seek instead of read. With ``checksum`` every byte is
    read and hashed. A sample is complete at its last regular member's end; on damage, the samples complete
    before it are kept and the sample in progress is dropped (its members uncounted): the one a cut member
    belongs to, or, when a header itself is damaged (its key unknown), the one before it.
    """
    digest = hashlib.sha256() if checksum else None
    limit = size if not checksum else None  # a known length: member data can be stepped over by seeking
    blocks = _Blocks(stream, seek=limit is not None, digest=digest)
    scan = ShardScan()
    offsets, keys, fields = scan.offsets, scan.keys, scan.fields
    key: str | None = None
    in_sample: list[tuple[str, int]] = []  # the current sample's (extension, size), undone on damage
    sample_end = 0  # where the current sample's last member ends
    first_header: int | None = None  # of the member being read: pax and long-name headers come first
    pax: dict[str, str] = {}
    long_name: str | None = None
    offset = member_header = 0
    fast = _member_at
    try:
        while True:
            pos = blocks.at(offset, BLOCK)
            if pos < 0:
                if pos == -2:
                    raise ShardReadError(f"truncated tar: the stream ends before byte {offset}, inside the "
                                         "data of the member whose header is here", url=url,
                                         offset=member_header)  # fmt: skip
                if blocks.end:
                    raise ShardReadError("truncated tar header", url=url, offset=offset)
                break  # a tar without the end-of-archive blocks, as some writers leave
            member = fast(blocks.buf, pos) if fast is not None and not pax and long_name is None else None
            if member is not None:
                member_size, name_key, ext, data_at = member
                starts_at = offset
                data_at += offset - pos
            else:
                header = bytes(blocks.view[pos : pos + BLOCK])
                if not checksum_matches(header):
                    if header == ZERO_BLOCK:
                        break
                    raise ShardReadError("corrupt tar header (checksum mismatch)", url=url, offset=offset)
                starts_at = offset if first_header is None else first_header
                if "size" in pax:
                    if not pax["size"].isdigit():
                        raise ShardReadError(f"corrupt pax header (size {pax['size']!r})", url=url,
                                             offset=starts_at)  # fmt: skip
                    member_size = int(pax["size"])
                else:
                    member_size = number(header[124:136], url, offset)
                typeflag = header[156]
                if typeflag not in REGULAR:
                    data_at = offset + BLOCK
                    if typeflag in (PAX, LONGNAME):
                        at = blocks.at(data_at, member_size)
                        if at < 0:
                            raise ShardReadError("truncated tar: a pax or long-name header", url=url,
                                                 offset=offset)  # fmt: skip
                        data = bytes(blocks.view[at : at + member_size])
                        if typeflag == PAX:
                            try:
                                pax = pax_records(data)
                            except ValueError as exc:
                                raise ShardReadError(f"corrupt pax header ({exc})", url=url,
                                                     offset=offset) from exc  # fmt: skip
                        else:
                            long_name = data.rstrip(b"\0").decode("utf-8", "surrogateescape")
                        first_header = starts_at
                    elif typeflag != GLOBAL_PAX:  # directories, links: not sample members
                        first_header, pax, long_name = None, {}, None
                    offset = data_at + member_size + (-member_size % BLOCK)
                    continue
                name = long_name if long_name is not None else pax.get("path") or header_name(header)
                pax, long_name, first_header = {}, None, None
                name_key, ext = split_member_name(name)
                data_at = offset + BLOCK
            end = data_at + member_size + (-member_size % BLOCK)
            if name_key != key:
                offsets.append(starts_at if key is None else sample_end)
                keys.append(name_key)
                key = name_key
                in_sample.clear()
            in_sample.append((ext, member_size))
            counts = fields.get(ext)
            if counts is None:
                fields[ext] = [1, member_size]
            else:
                counts[0] += 1
                counts[1] += member_size
            if limit is not None and end > limit:  # counted first: its sample, not the one before, is cut
                raise ShardReadError(f"truncated tar: member needs {end - offset} bytes with its header, "
                                     f"{limit - offset} remain", url=url, offset=offset)  # fmt: skip
            member_header = starts_at
            sample_end = offset = end
        if key is not None:
            offsets.append(sample_end)
        scan.size = limit if limit is not None else blocks.drain()
    except (ShardReadError, OSError) as exc:
        if isinstance(exc, ShardReadError):
            scan.damage, scan.damage_offset = exc.message, exc.offset
        else:
            scan.damage, scan.damage_offset = f"read failed: {exc.strerror or exc}", offset
        if keys:  # the sample in progress is dropped; those before it are whole
            keys.pop()
            del offsets[len(keys) + 1 if keys else 0 :]
            for ext, member_size in in_sample:
                fields[ext][0] -= 1
                fields[ext][1] -= member_size
                if not fields[ext][0]:
                    del fields[ext]
        scan.size = size if size is not None else blocks.read_to
    if digest is not None and scan.damage is None:
        scan.sha256 = digest.hexdigest()
    return scan


def scan_file(path: str | os.PathLike[str], *, checksum: bool = False, url: str | None = None) -> ShardScan:
    """Scan a local tar by seeking over member data."""
    shown = url or os.fspath(path)
    try:
        handle = open(path, "rb", buffering=0)  # noqa: SIM115 - closed below; our own buffer does the reads
    except OSError as exc:
        return ShardScan(damage=f"cannot open: {exc.strerror or exc}", damage_offset=0)
    with handle:
        return scan_shard(handle, url=shown, checksum=checksum, size=os.fstat(handle.fileno()).st_size)
