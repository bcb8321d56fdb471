"""One tar member's header, read the way GNU tar reads it: numbers, names, pax records, the checksum.

Shared by the reader (``tarread``), which copies members into samples, and the header walk (``scan``),
which only maps them; each keeps its own loop (a fused one, for speed) over these pieces. Trade-off:
the pieces are plain functions and constants, so the hot loops pay a global lookup, not a method call.
"""

from __future__ import annotations

from ..errors import ShardReadError
from .constants import BLOCK

OCTAL_DIGITS = b"01234567"
PAX_SIZE_DIGITS = 20  # 2**64 has 20 decimal digits: no file holds a member larger


def number(field: bytes, url: str, offset: int) -> int:
    """A header's number field: octal text or GNU base-256; damage is a ShardReadError at ``offset``."""
    value = gnu_number(field)
    if value is not None:
        return value
    if field[:1] == b"\xff":
        raise ShardReadError("corrupt tar header (a negative base-256 size)", url=url, offset=offset)
    text = (field[1:] if field[:1] == b"\0" else field).split(b"\0", 1)[0].strip(_SPACE)
    raise ShardReadError(f"corrupt tar header (bad number {text!r})", url=url, offset=offset)


def gnu_number(field: bytes) -> int | None:
    """A number field as GNU tar's from_header reads it, or None where GNU tar refuses it.

    One leading NUL skipped (a previous field's overflow, GNU tar says), then leading white space, octal
    digits, and a NUL or white space (what follows it is not read), or GNU base-256. Python's ``int``
    would also take a sign and ``_``, and a size of -512 walked back onto its own header forever; reading
    a leading NUL as the end gave size 0, and the member's data was read as headers (a tar inside it)."""
    if field[:1] == b"\x80":  # GNU base-256 for sizes past 8 GiB
        return int.from_bytes(field[1:], "big")
    if field[:1] == b"\xff":  # GNU base-256, negative: no size, checksum or mtime here is negative
        return None
    text = field[1:] if field[:1] == b"\0" else field
    digits = text.lstrip(_SPACE)
    if not digits:  # GNU tar: "blanks in header where numeric value expected"
        return None
    rest = digits.lstrip(OCTAL_DIGITS)
    if rest[:1] and rest[:1] not in _ENDS:  # a sign, '_', an 8, ...
        return None
    digits = digits[: len(digits) - len(rest)]
    return int(digits, 8) if digits else 0


_SPACE = b" \t\n\v\f\r"  # C's isspace, which GNU tar uses
_ENDS = [b"\0", *(bytes([c]) for c in _SPACE)]


def pax_size(value: str, url: str, offset: int) -> int:
    """A pax ``size`` record: ASCII decimal digits, at most ``PAX_SIZE_DIGITS`` (``str.isdigit`` alone also
    takes '²' and '٣', which ``int`` then refuses); else a ShardReadError at ``offset``."""
    if not (value.isascii() and value.isdigit()) or len(value) > PAX_SIZE_DIGITS:
        raise ShardReadError(f"corrupt pax header (size {value[:40]!r})", url=url, offset=offset)
    return int(value)


def pax_records(data: bytes) -> dict[str, str]:
    """``"%d %s=%s\n"`` records (the length counts the whole record); ValueError naming a malformed one."""
    records = {}
    pos = 0
    while pos < len(data) and data[pos]:  # NULs after the records are padding
        space = data.find(b" ", pos)
        digits = data[pos:space] if space > pos else b""
        length = int(digits) if digits.isdigit() else 0
        end = pos + length
        if length <= len(digits) + 1 or end > len(data) or data[end - 1] != 0x0A:
            raise ValueError(f"malformed pax record at byte {pos} of {len(data)}: {data[pos : pos + 40]!r}")
        key, equals, value = data[space + 1 : end - 1].partition(b"=")
        if not equals:
            raise ValueError(f"pax record without '=' at byte {pos}: {data[pos:end]!r}")
        records[key.decode("utf-8", "replace")] = value.decode("utf-8", "surrogateescape")
        pos = end
    return records


ZERO_BLOCK = bytes(BLOCK)  # two of them end an archive


def header_name(header: bytes) -> str:
    """The member name in a ustar header: the name field, after the prefix field when there is one.

    Only a POSIX header (magic "ustar\\0") has a prefix; in a GNU one (magic "ustar  ") those bytes hold
    access and change times, which GNU tar never reads as part of the name (Python's tarfile does)."""
    name = header[0:100].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
    if header[345] and header[257:263] == b"ustar\0":
        prefix = header[345:500].split(b"\0", 1)[0]
        name = prefix.decode("utf-8", "surrogateescape") + "/" + name
    return name


def long_name(data: bytes) -> str:
    """A GNU long name ('L') member's name: its data up to the first NUL, as GNU tar reads it."""
    return data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


REGULAR = frozenset(b"0\x007")
PAX, GLOBAL_PAX, LONGNAME = ord("x"), ord("g"), ord("L")


def checksum_matches(header: bytes) -> bool:
    """The exact checksum check, for any spelling of the field GNU tar reads ("%07o\\0", " %05o\\0 ", ...):
    off the hot path."""
    stored = gnu_number(header[148:156])
    return stored is not None and stored == sum(header) - sum(header[148:156]) + 256
