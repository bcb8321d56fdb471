"""POSIX tar headers built by hand (ustar, pax where names or sizes need it): exact sizes, no tarfile cost.

Sizes are known before anything is written, which is what lets the shard writer promise a hard size cap.
"""

from __future__ import annotations

from .constants import BLOCK, FIXED_MTIME

_USTAR_MAX_SIZE = 8**11 - 1
_MODE = 0o644


def padded(size: int) -> int:
    return -size % BLOCK


def _octal(value: int, width: int) -> bytes:
    # width includes the trailing NUL, as GNU tar and Python's tarfile write it.
    return f"{value:0{width - 1}o}".encode("ascii") + b"\0"


def _split_ustar(name_bytes: bytes) -> tuple[bytes, bytes] | None:
    if len(name_bytes) <= 100:
        return b"", name_bytes
    # ustar can hold up to 155 bytes of directory in "prefix", cut at a slash. The last slash that fits
    # leaves the shortest rest: if that is over 100 bytes (or empty), no cut works.
    cut = name_bytes.rfind(b"/", 0, 156)
    rest = name_bytes[cut + 1 :]
    return (name_bytes[:cut], rest) if cut > 0 and 0 < len(rest) <= 100 else None


def _raw_header(name: bytes, prefix: bytes, size: int, typeflag: bytes) -> bytes:
    header = bytearray(BLOCK)
    header[0 : len(name)] = name
    header[100:108] = _octal(_MODE, 8)
    header[108:116] = _octal(0, 8)
    header[116:124] = _octal(0, 8)
    header[124:136] = _octal(size, 12)
    header[136:148] = _octal(FIXED_MTIME, 12)
    header[148:156] = b" " * 8
    header[156:157] = typeflag
    header[257:263] = b"ustar\0"
    header[263:265] = b"00"
    header[345 : 345 + len(prefix)] = prefix
    checksum = sum(header)
    header[148:156] = f"{checksum:06o}".encode("ascii") + b"\0 "
    return bytes(header)


def _pax_record(key: str, value: str) -> bytes:
    body = f" {key}={value}\n".encode()
    length = len(body)
    # The length field counts itself, so iterate until the digit count is stable.
    while True:
        total = len(str(length)) + len(body)
        if total == length:
            return str(length).encode("ascii") + body
        length = total


def _template() -> tuple[bytes, bytes, bytes, int]:
    """The fixed parts of a plain ustar header, and their byte sum with the checksum field as spaces."""
    header = _raw_header(b"", b"", 0, b"0")
    mode_ids, mtime, tail = header[100:124], header[136:148], header[156:]
    return mode_ids, mtime, tail, sum(mode_ids) + sum(mtime) + sum(tail) + 8 * 32


_MODE_IDS, _MTIME, _TAIL, _FIXED_SUM = _template()


def member_header(name: str, size: int) -> bytes:
    """Header block(s) for a regular file; one 512-byte block unless pax records are needed."""
    if len(name) <= 100 and size <= _USTAR_MAX_SIZE and name.isascii():
        # The common case, from a template: only the name, size and checksum change (~5x faster).
        name_bytes = name.encode("ascii")
        size_field = b"%011o\0" % size
        checksum = b"%06o\0 " % (_FIXED_SUM + sum(name_bytes) + sum(size_field))
        return b"".join(
            (name_bytes, bytes(100 - len(name_bytes)), _MODE_IDS, size_field, _MTIME, checksum, _TAIL)
        )
    name_bytes = name.encode("utf-8")
    split = _split_ustar(name_bytes) if name.isascii() else None
    records = b""
    if split is None:
        records += _pax_record("path", name)
        ascii_name = name.encode("ascii", "replace")[-100:]
        split = (b"", ascii_name)
    if size > _USTAR_MAX_SIZE:
        records += _pax_record("size", str(size))
    if not records:
        return _raw_header(split[1], split[0], size, b"0")
    pax = _raw_header(b"././@PaxHeader", b"", len(records), b"x")
    pax += records + b"\0" * padded(len(records))
    return pax + _raw_header(split[1], split[0], min(size, _USTAR_MAX_SIZE), b"0")


def member_size(name: str, size: int) -> int:
    """Bytes a member takes in the archive, headers and padding included."""
    return len(member_header(name, size)) + size + padded(size)


def end_of_archive() -> bytes:
    return b"\0" * (2 * BLOCK)
