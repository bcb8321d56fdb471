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
    """A header's number field: octal text or GNU base-256; damage is a ShardReadError at ``offset``.

    Octal digits only, between leading spaces and a NUL or space, as GNU tar (and the C fast path) read
    them: Python's ``int`` would also take a sign and ``_``, and a size of -512 walked back onto its own
    header forever."""
    if field[:1] == b"\x80":  # GNU base-256 for sizes past 8 GiB
        return int.from_bytes(field[1:], "big")
    if field[:1] == b"\xff":  # GNU base-256, negative: no member has a negative size
        raise ShardReadError("corrupt tar header (a negative base-256 size)", url=url, offset=offset)
    # Leading spaces, octal digits, then a NUL or space ends it (what follows is not read, as GNU tar).
    text = field.split(b"\0", 1)[0].lstrip(b" ").split(b" ", 1)[0]
    if text.translate(None, OCTAL_DIGITS):  # anything but octal digits: a sign, '_', an 8, ...
        raise ShardReadError(f"corrupt tar header (bad number {text!r})", url=url, offset=offset)
    return int(text, 8) if text else 0


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
    """The member name in a ustar header: the name field, after the prefix field when there is one."""
    name = header[0:100].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
    if header[345] and header[257:262] == b"ustar":
        prefix = header[345:500].split(b"\0", 1)[0]
        name = prefix.decode("utf-8", "surrogateescape") + "/" + name
    return name


REGULAR = frozenset(b"0\x007")
PAX, GLOBAL_PAX, LONGNAME = ord("x"), ord("g"), ord("L")


def checksum_matches(header: bytes) -> bool:
    """The exact checksum check, for any spelling of the field ("%07o\0", " %05o\0 ", ...): off the hot
    path."""
    field = header[148:156]
    try:
        stored = int(field.split(b"\0", 1)[0], 8)
    except ValueError:
        return False
    return stored == sum(header) - sum(field) + 256
