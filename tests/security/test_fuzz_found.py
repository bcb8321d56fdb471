"""What the tar reader fuzzing (test_fuzz_readers.py) found: headers GNU tar reads one way and the readers
read another, each a sample named or cut differently from the same bytes. GNU tar is the rule (issue 32,
item 1): a number field skips one leading NUL and leading white space, ends at a NUL or white space, and
may use all twelve bytes; blanks are no number; a GNU header has no ustar prefix; a long name ends at its
first NUL; the checksum field is read by the same rule, never by Python's ``int``. Every reader: the fused
one (C fast path and pure Python) and the header walk behind ``shardstream index``."""

from __future__ import annotations

import io
import tarfile

import pytest

import shardstream.format.tarread as tarread
from shardstream.errors import ShardReadError
from shardstream.format import end_of_archive, member_header
from shardstream.format.scan import scan_shard
from shardstream.format.tarheader import padded
from tests.security.fuzzkit import resum

pytestmark = pytest.mark.timeout(60)


def _member(name: str, data: bytes, header: bytes | None = None) -> bytes:
    return (header or member_header(name, len(data))) + data + bytes(padded(len(data)))


def _with(header: bytes, start: int, field: bytes, *, checksum: bool = True) -> bytes:
    block = bytearray(header)
    block[start : start + len(field)] = field
    if checksum:
        resum(block)
    return bytes(block)


def _samples(data: bytes) -> list[tuple[str, dict[str, bytes]]]:
    return [
        (s["__key__"], {k: bytes(v) for k, v in s.items() if not k.startswith("__")})
        for s in tarread.iter_samples(io.BytesIO(data), url="shard.tar")
    ]


def _walk(data: bytes) -> list[str]:
    scan = scan_shard(io.BytesIO(data), url="shard.tar", size=len(data))
    assert scan.damage is None, scan
    return scan.keys


def test_a_size_field_with_a_leading_nul_is_read_past_it_not_as_size_0(reader):
    """``\\0`` then ``0000001000``: GNU tar reads 512. Read as 0, the member's data (here a tar header of
    its own) was read as the next member: a sample the archive does not hold."""
    inner = member_header("smuggled.txt", 0)
    header = _with(member_header("a.bin", len(inner)), 124, b"\x0000001000\0\0")
    data = _member("a.bin", inner, header) + _member("b.txt", b"b") + end_of_archive()
    assert _samples(data) == [("a", {"bin": inner}), ("b", {"txt": b"b"})]
    assert _walk(data) == ["a", "b"]


def test_all_twelve_size_digits_count(reader):
    """``000000010000`` (no NUL): GNU tar and the C path read 4096; the Python path read eleven digits."""
    body = bytes(range(256)) * 16
    header = _with(member_header("a.bin", len(body)), 124, b"000000010000")
    data = _member("a.bin", body, header) + _member("b.txt", b"b") + end_of_archive()
    assert _samples(data) == [("a", {"bin": body}), ("b", {"txt": b"b"})]


@pytest.mark.parametrize("field", [b" " * 12, b"\0" + b" " * 11], ids=["spaces", "nul-spaces"])
def test_a_blank_size_field_is_damage(reader, field):
    """GNU tar: "blanks in header where numeric value expected". Read as 0, the data became headers."""
    header = _with(member_header("a.bin", 512), 124, field)
    data = _member("a.bin", member_header("smuggled.txt", 0), header) + end_of_archive()
    with pytest.raises(ShardReadError, match=r"at byte 0: corrupt tar header \(bad number"):
        _samples(data)


def _gnu(name: str, data: bytes) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info.tobuf(format=tarfile.GNU_FORMAT) + data + bytes(padded(len(data)))


def test_a_gnu_header_has_no_prefix_field(reader):
    """In a GNU header (magic "ustar  ") bytes 345-368 are the access and change times (``tar -G`` writes
    them); read as a ustar prefix they made the key ``14166147740/a``."""
    member = _gnu("a.txt", b"text")
    header = _with(member[:512], 345, b"14166147740\x0014166147740\0")
    data = header + member[512:] + _gnu("a.cls", b"1") + end_of_archive()
    assert _samples(data) == [("a", {"txt": b"text", "cls": b"1"})]
    assert _walk(data) == ["a"]


def _long_named(long: bytes, data: bytes) -> bytes:
    header = _with(member_header("././@LongLink", len(long)), 156, b"L")
    return _member("", long, header) + _member("short.txt", data)


def test_a_long_name_ends_at_its_first_nul(reader):
    """GNU tar's long name is a C string; kept whole, the NUL and what follows went into the key."""
    data = _long_named(b"x.txt\0/junk/y.bin\0", b"text") + _member("x.cls", b"1") + end_of_archive()
    assert _samples(data) == [("x", {"txt": b"text", "cls": b"1"})]


def test_the_header_walk_ends_a_long_name_at_its_first_nul():
    data = _long_named(b"x.txt\0/junk/y.bin\0", b"text") + _member("x.cls", b"1") + end_of_archive()
    assert _walk(data) == ["x"]


CHECKSUMS = {
    "plus": b"+%05o\0 ",  # Python's int() takes the sign
    "underscore": b"%03o_%03o",
    "junk-after": b"%06o\x10\x10",  # the two bytes after the digits are not NUL or space
}


@pytest.mark.parametrize("spelling", CHECKSUMS.values(), ids=CHECKSUMS.keys())
def test_a_checksum_field_gnu_tar_would_not_read_is_damage(reader, spelling):
    """The right value, spelled as GNU tar refuses: a corrupt header, not a member."""
    block = bytearray(member_header("a.txt", 1))
    resum(block)
    value = int(bytes(block[148:154]), 8)
    field = spelling % ((value >> 9, value & 511) if b"_" in spelling else value)
    data = _with(bytes(block), 148, field, checksum=False) + b"a".ljust(512, b"\0") + end_of_archive()
    with pytest.raises(ShardReadError, match=r"at byte 0: corrupt tar header \(checksum"):
        _samples(data)
    scan = scan_shard(io.BytesIO(data), url="shard.tar", size=len(data))
    assert (scan.damage, scan.damage_offset) == ("corrupt tar header (checksum mismatch)", 0)


def test_a_wrong_checksum_is_not_made_up_for_by_the_fields_spelling(reader):
    """A name byte 5 higher, the checksum's leading '0' a '+' (5 lower): the byte sum is the one the
    usual spelling "%06o\\0 " of the stored value implies, but the stored value is 5 short. The quick check
    compared sums only, and took the header."""
    block = bytearray(member_header("a.txt", 1))
    resum(block)
    assert block[148] == ord("0")
    block[148] = ord("+")
    block[0] += 5  # "a" -> "f"
    data = bytes(block) + b"a".ljust(512, b"\0") + end_of_archive()
    with pytest.raises(ShardReadError, match=r"at byte 0: corrupt tar header \(checksum"):
        _samples(data)
