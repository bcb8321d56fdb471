"""Tar headers and the reader at their edges: size and name limits, other type flags, damage, big members.

Every reader test runs on the C header fast path and on pure Python.
"""

from __future__ import annotations

import io
import os
import tarfile

import pytest

import shardstream.format.tarread as tarread
from shardstream.errors import ShardReadError
from shardstream.format import end_of_archive, member_header, member_size, split_member_name
from shardstream.format.tarheader import padded

C_SCAN = tarread._member_at
USTAR_MAX = 8**11 - 1


@pytest.fixture(params=["c", "python"])
def reader(request, monkeypatch):
    if request.param == "c" and C_SCAN is None:
        pytest.skip("shardstream/format/_tarscan.c is not built")
    if request.param == "python":
        monkeypatch.setattr(tarread, "_member_at", None)
    return request.param


def _member(name: str, data: bytes) -> bytes:
    return member_header(name, len(data)) + data + bytes(padded(len(data)))


def _read(archive: bytes, **kwargs):
    spans: list = []
    samples = list(tarread.iter_samples(io.BytesIO(archive), url="u", spans=spans, **kwargs))
    return samples, spans


def _resum(header: bytes) -> bytes:
    """The header with its checksum recomputed (after a field was edited), as GNU tar writes it."""
    block = bytearray(header)
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def _tarfile_names(archive: bytes):
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
        return [(m.name, m.size, tar.extractfile(m).read()) for m in tar.getmembers()]


# -- headers ---------------------------------------------------------------------------------------


def test_the_largest_ustar_size_has_one_header_and_one_more_byte_needs_pax():
    assert len(member_header("k.bin", USTAR_MAX)) == 512
    assert member_header("k.bin", USTAR_MAX)[124:136] == b"77777777777\0"
    header = member_header("k.bin", USTAR_MAX + 1)
    assert header[156:157] == b"x" and len(header) == 3 * 512
    assert member_size("k.bin", USTAR_MAX + 1) == 3 * 512 + USTAR_MAX + 1
    with tarfile.open(fileobj=io.BytesIO(header + bytes(1024)), mode="r|") as tar:
        member = tar.next()
    assert (member.name, member.size) == ("k.bin", USTAR_MAX + 1)
    long = "n" * 120 + ".bin"  # a pax path in any case: the size record comes only past the ustar field
    for size, records in ((USTAR_MAX, {"path"}), (USTAR_MAX + 1, {"path", "size"})):
        with tarfile.open(fileobj=io.BytesIO(member_header(long, size) + bytes(1024)), mode="r|") as tar:
            member = tar.next()
        assert (member.name, member.size, set(member.pax_headers)) == (long, size, records)


@pytest.mark.parametrize(
    ("name", "blocks"),  # 1: a ustar header alone; 3: a pax header, its record block, the ustar header
    [
        ("n" * 96 + ".txt", 1),  # exactly 100 bytes: fills the name field, no NUL
        ("n" * 97 + ".txt", 3),  # 101 bytes, no slash: a pax path
        ("d" * 155 + "/" + "n" * 96 + ".txt", 1),  # the longest ustar prefix and the longest name
        ("d" * 156 + "/x.txt", 3),  # a prefix one byte too long
        ("d" * 50 + "/" + "n" * 97 + ".txt", 3),  # the part after the last slash over 100 bytes
        ("d" * 150 + "/" + "e" * 20 + "/f.txt", 1),  # the last slash past 155: cut at the one before
        ("a/" + "é" * 60 + ".txt", 3),  # not ASCII: a pax path, whatever the length
        ("a/" + "n" * 95 + ".txt", 1),  # a one-byte prefix
        ("/" + "n" * 96 + ".txt", 3),  # an empty prefix would drop the leading slash: a pax path
    ],
    ids=[
        "name-100",
        "name-101",
        "prefix-155",
        "prefix-156",
        "rest-101",
        "cut-earlier",
        "non-ascii",
        "prefix-1",
        "absolute-101",
    ],
)
def test_names_at_the_ustar_limits_round_trip(reader, name, blocks):
    data = b"abc"
    header = member_header(name, len(data))
    assert len(header) == blocks * 512
    assert member_size(name, 3) == len(header) + 512
    archive = header + data + bytes(padded(3)) + end_of_archive()
    assert _tarfile_names(archive) == [(name, 3, data)]
    samples, spans = _read(archive)
    key, ext = name.rsplit(".", 1)
    assert samples == [{"__key__": key, "__url__": "u", ext: data}]
    assert spans == [(0, len(header) + 512)]


# -- sizes the reader must parse --------------------------------------------------------------------


def test_a_pax_size_is_read_and_a_short_member_is_named_with_the_size_it_needs(reader):
    archive = member_header("k.bin", USTAR_MAX + 1) + b"x" * 100
    needs = USTAR_MAX + 1 + padded(USTAR_MAX + 1)
    # The offset named is the member's own header, after the pax header and its record block.
    message = rf"^u member 'k\.bin' at byte 1024: truncated tar: member needs {needs} bytes with padding, 100"
    with pytest.raises(ShardReadError, match=message):
        _read(archive)


def test_gnu_base256_sizes_are_read(reader):
    header = bytearray(member_header("k.txt", 3))
    header[124:136] = b"\x80" + (3).to_bytes(11, "big")
    archive = _resum(bytes(header)) + b"abc" + bytes(509) + _member("l.txt", b"de") + end_of_archive()
    samples, spans = _read(archive)
    assert samples == [
        {"__key__": "k", "__url__": "u", "txt": b"abc"},
        {"__key__": "l", "__url__": "u", "txt": b"de"},
    ]
    assert spans == [(0, 1024), (1024, 2048)]
    info = tarfile.TarInfo("big.bin")
    info.size = 2**33 + 5
    # tarfile's own GNU header (addfile would want the 8 GiB too: Python 3.13 refuses a header alone)
    header = info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
    assert header[124:125] == b"\x80"
    needs = 2**33 + 5 + padded(2**33 + 5)
    remain = 9728  # what tarfile pads an archive of one header to (its 10 KiB record)
    message = (
        rf"^u member 'big\.bin' at byte 0: truncated tar: member needs {needs} bytes with padding, {remain}"
    )
    with pytest.raises(ShardReadError, match=message):
        _read(header + bytes(remain))


def test_a_size_that_is_not_a_number_is_named(reader):
    header = bytearray(member_header("k.txt", 3))
    header[124:136] = b"zz3\0        "
    archive = _resum(bytes(header)) + b"abc" + bytes(509) + end_of_archive()
    with pytest.raises(ShardReadError, match=r"^u at byte 0: corrupt tar header \(bad number b'zz3'\)$"):
        _read(archive)


@pytest.mark.parametrize(
    ("field", "size"),
    [
        (b"          3 ", 3),  # space-padded, as old writers leave it
        (b"3\0\0\0\0\0\0\0\0\0\0\0", 3),  # ended early by a NUL
        (b" 3\0 garbage ", 3),  # what follows the NUL is not read
        (bytes(12), 0),  # all NUL: an empty member
    ],
    ids=["spaces", "early-nul", "after-nul", "empty"],
)
def test_other_spellings_of_the_size_field_are_read(reader, field, size):
    header = bytearray(member_header("k.txt", size))
    header[124:136] = field
    data = b"abc"[:size]
    archive = _resum(bytes(header)) + data + bytes(padded(size)) + _member("l.txt", b"de") + end_of_archive()
    samples, spans = _read(archive)
    assert [(s["__key__"], s["txt"]) for s in samples] == [("k", data), ("l", b"de")]
    assert spans[1] == (512 + size + padded(size), 512 + size + padded(size) + 1024)


# -- type flags -----------------------------------------------------------------------------------


def _typed(name: str, data: bytes, flag: bytes) -> bytes:
    header = bytearray(member_header(name, len(data)))
    header[156:157] = flag
    return _resum(bytes(header)) + data + bytes(padded(len(data)))


@pytest.mark.parametrize("flag", [b"0", b"\0", b"7"])
def test_regular_file_flags_are_members(reader, flag):
    archive = _typed("a.txt", b"abc", flag) + _typed("a.json", b"{}", flag) + end_of_archive()
    samples, spans = _read(archive)
    assert samples == [{"__key__": "a", "__url__": "u", "txt": b"abc", "json": b"{}"}]
    assert spans == [(0, 2048)]


@pytest.mark.parametrize("flag", [b"5", b"2", b"1", b"3", b"6"])
def test_directories_and_links_are_skipped_and_not_counted_in_spans(reader, flag):
    archive = _member("a.txt", b"abc") + _typed("d", b"", flag) + _member("b.txt", b"de") + end_of_archive()
    samples, spans = _read(archive)
    assert [s["__key__"] for s in samples] == ["a", "b"]
    assert spans == [(0, 1536), (1536, 2560)]


def test_a_global_pax_header_belongs_to_the_first_sample_span(reader):
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"c": "d"}) as tar:
        for name, data in (("a.txt", b"abc"), ("b.txt", b"de")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    data = archive.getvalue()
    assert data[156:157] == b"g"
    samples, spans = _read(data)
    assert [s["__key__"] for s in samples] == ["a", "b"]
    assert spans == [(0, 2048), (2048, 3072)]


def test_a_pax_path_record_names_the_member_and_a_pax_comment_alone_does_not(reader):
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, extra in (("a.txt", b"abc", {"comment": "x" * 200}), ("p" * 120 + ".txt", b"d", {})):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.pax_headers = extra
            tar.addfile(info, io.BytesIO(data))
    samples, spans = _read(archive.getvalue())
    assert [(s["__key__"], s["txt"]) for s in samples] == [("a", b"abc"), ("p" * 120, b"d")]
    assert spans == [(0, 2048), (2048, 4096)]


# -- the end, damage, members past the read window ------------------------------------------------


def test_an_archive_without_its_end_blocks_is_read_whole(reader):
    archive = _member("a.txt", b"abc") + _member("b.txt", b"de")
    samples, spans = _read(archive)
    assert [(s["__key__"], s["txt"]) for s in samples] == [("a", b"abc"), ("b", b"de")]
    assert spans == [(0, 1024), (1024, 2048)]


def test_a_partial_header_is_named_at_its_offset(reader):
    archive = _member("a.txt", b"abc") + member_header("b.txt", 2)[:300]
    with pytest.raises(ShardReadError, match=r"^u at byte 1024: truncated tar header$"):
        _read(archive)


def test_a_zero_block_ends_the_archive_even_before_more_members(reader):
    archive = _member("a.txt", b"abc") + bytes(512) + _member("b.txt", b"de")
    assert [s["__key__"] for s in _read(archive)[0]] == ["a"]


def test_a_member_larger_than_the_read_window_is_read_and_its_truncation_named(reader):
    big = os.urandom((1 << 20) + 1000)  # past the 1 MiB window
    archive = _member("a.bin", b"x") + _member("b.bin", big) + _member("c.bin", b"yz") + end_of_archive()
    samples, spans = _read(archive)
    assert [s["bin"] for s in samples] == [b"x", big, b"yz"]
    end_b = 1024 + 512 + len(big) + padded(len(big))
    assert spans == [(0, 1024), (1024, end_b), (end_b, end_b + 1024)]
    cut = archive[: 1024 + 512 + len(big) - 10]
    with pytest.raises(
        ShardReadError,
        match=rf"^u member 'b\.bin' at byte 1024: truncated tar: member needs {len(big) + padded(len(big))} "
        rf"bytes with padding, {len(big) - 10} remain$",
    ):
        _read(cut)


def test_missing_padding_after_the_last_member_is_truncation(reader):
    archive = member_header("a.txt", 3) + b"abc" + bytes(100)
    message = r"^u member 'a\.txt' at byte 0: truncated tar: member needs 512 bytes with padding, 103 remain$"
    with pytest.raises(ShardReadError, match=message):
        _read(archive)


def test_start_and_ends_give_true_offsets_after_a_seek(reader):
    members = (("a", 3), ("b", 600), ("c", 1))
    archive = b"".join(_member(f"{k}.txt", b"v" * n) for k, n in members) + end_of_archive()
    starts = [0, 1024, 2560]
    samples, spans = _read(archive[1024:], start=1024, ends=[2560, 3584])
    assert [s["__key__"] for s in samples] == ["b", "c"]
    assert spans == [(1024, 2560), (2560, 3584)] and [s for s, _ in spans] == starts[1:]


@pytest.mark.parametrize("name", ["a.b/c.d.e", "dir/.x", "a./b.c", "noext", "a/b/c"])
def test_the_reader_splits_member_names_as_the_key_rule_does(reader, name):
    archive = _member(name, b"abc") + end_of_archive()
    samples, _ = _read(archive)
    key, ext = split_member_name(name)
    assert samples == [{"__key__": key, "__url__": "u", ext: b"abc"}]


def test_members_that_straddle_the_end_of_the_read_window_are_read_whole(reader):
    datas = [os.urandom(n) for n in (400_000, 400_001, 400_002, 399_999, 3)]  # ~1.6 MB past a 1 MiB window
    archive = b"".join(_member(f"{i}.bin", d) for i, d in enumerate(datas)) + end_of_archive()
    samples, spans = _read(archive)
    assert [s["bin"] for s in samples] == datas
    ends = [sum(512 + len(d) + padded(len(d)) for d in datas[: i + 1]) for i in range(len(datas))]
    assert spans == list(zip([0, *ends[:-1]], ends, strict=True))


@pytest.mark.parametrize(
    ("name", "fallback"),
    [("n" * 120 + ".txt", b"n" * 96 + b".txt"), ("a/" + "é" * 60 + ".txt", b"a/" + b"?" * 60 + b".txt")],
)
def test_a_pax_path_leaves_the_names_end_in_the_ustar_field_for_readers_without_pax(name, fallback):
    header = member_header(name, 3)
    ustar = header[-512:]
    assert ustar[:100].rstrip(b"\0") == fallback and ustar[345:500] == bytes(155)


def _high_sum_header(name: str, size: int) -> bytes:
    """A valid header whose byte sum is past 65521 (the adler32 modulus): its unused fields full of 0xff."""
    block = bytearray(member_header(name, size))
    for start, end in ((157, 257), (265, 329), (329, 345), (500, 512)):  # linkname, uname+gname, dev, pad
        block[start:end] = b"\xff" * (end - start)
    block[345:500] = b"\xfe" * 155  # the name's prefix
    return _resum(bytes(block))


def _with_checksum(header: bytes, value: int) -> bytes:
    block = bytearray(header)
    block[148:156] = b"%06o\0 " % value
    return bytes(block)


def test_a_header_with_a_byte_sum_past_the_adler_modulus_is_read(reader):
    header = _high_sum_header("a.txt", 3)
    assert sum(header) > 65521
    samples, _ = _read(header + b"abc" + bytes(padded(3)) + end_of_archive())
    assert len(samples) == 1 and list(samples[0].values())[-1] == b"abc"


@pytest.mark.parametrize(
    ("high", "off"),
    [(False, 65521), (False, 2 * 65521), (False, 1), (True, 65521), (True, -65521), (True, -1)],
)
def test_a_checksum_off_by_a_multiple_of_the_adler_modulus_is_damage(reader, high, off):
    """The fast path compares byte sums modulo 65521; a stored checksum 65521 away must still fail."""
    header = _high_sum_header("a.txt", 3) if high else member_header("a.txt", 3)
    true = int(header[148:154], 8)
    archive = member_header("z.txt", 1) + b"z" + bytes(511)
    archive += _with_checksum(header, true + off) + b"abc" + bytes(padded(3)) + end_of_archive()
    with pytest.raises(ShardReadError, match=r"at byte 1024: corrupt tar header \(checksum mismatch\)"):
        _read(archive)


# -- pax records, base-256 and octal sizes, ustar name splits -----------------------------------------


def _record(key: bytes, value: bytes) -> bytes:
    body = b" " + key + b"=" + value + b"\n"
    length = len(body) + 1
    while len(str(length)) + len(body) != length:
        length += 1
    return str(length).encode() + body


def _pax(records: bytes) -> bytes:
    header = bytearray(member_header("PaxHeader/a", len(records)))
    header[156:157] = b"x"
    return _resum(bytes(header)) + records + bytes(padded(len(records)))


def test_several_pax_records_are_read_and_nul_padding_after_them_is_ignored(reader):
    records = _record(b"comment", b"x y=z") + _record(b"path", b"deep/name.txt") + _record(b"mtime", b"1.5")
    for data in (records, records + bytes(7)):
        archive = _pax(data) + _member("short.txt", b"abc") + end_of_archive()
        assert [s["__key__"] for s in _read(archive)[0]] == ["deep/name"]


def test_pax_keys_and_values_that_are_not_utf8_are_read(reader):
    records = _record(b"comm\xffent", b"x") + _record(b"path", b"caf\xe9.txt")
    samples, _ = _read(_pax(records) + _member("short.txt", b"abc") + end_of_archive())
    assert [s["__key__"] for s in samples] == ["caf\udce9"]  # surrogateescape: the bytes as they were


@pytest.mark.parametrize(
    "records",
    [
        b"no-space-here\n",
        b" 9 path=a\n",
        b"0 path=a\n",
        b"99 path=a.txt\n",
        b"14 path=a.txt!",
        b"10 path\n",
        b"x4 path=a.txt\n",
        b"3 \n",
    ],
    ids=["no-space", "no-length", "zero", "too-long", "no-newline", "no-equals", "not-digits", "no-room"],
)
def test_a_malformed_pax_record_is_named_at_its_header(reader, records):
    archive = _member("z.txt", b"z") + _pax(records) + _member("a.txt", b"abc") + end_of_archive()
    expected = r"^u at byte 1024: corrupt pax header \((malformed pax record|pax record without '=')"
    with pytest.raises(ShardReadError, match=expected):
        _read(archive)


def test_a_malformed_pax_record_is_quoted_by_its_first_40_bytes(reader):
    good = _record(b"path", b"a.txt")
    bad = b"999 comment=" + b"y" * 60 + b"\n"  # its length runs past the header's data
    data = good + bad
    archive = _member("z.txt", b"z") + _pax(data) + _member("a.txt", b"abc") + end_of_archive()
    with pytest.raises(ShardReadError) as failed:
        _read(archive)
    excerpt = b"999 comment=" + b"y" * 28
    assert str(failed.value) == (
        f"u at byte 1024: corrupt pax header (malformed pax record at byte {len(good)} of {len(data)}: "
        f"{excerpt!r})"
    )


def test_a_pax_size_that_is_not_a_number_is_named(reader):
    archive = _pax(_record(b"size", b"12x")) + _member("a.txt", b"abc") + end_of_archive()
    with pytest.raises(ShardReadError, match=r"^u at byte 0: corrupt pax header \(size '12x'\)"):
        _read(archive)


def test_a_negative_base256_size_is_named(reader):
    header = bytearray(member_header("k.txt", 3))
    header[124:136] = b"\xff" * 11 + b"\xfd"
    with pytest.raises(ShardReadError, match=r"^u at byte 0: corrupt tar header \(a negative base-256 size"):
        _read(_resum(bytes(header)) + b"abc" + bytes(509) + end_of_archive())


@pytest.mark.parametrize(("field", "size"), [(b"12\0", 10), (b"  17 \0", 15), (b"777\0", 511)])
def test_odd_spellings_of_the_size_field_are_octal(reader, field, size):
    header = bytearray(member_header("k.bin", size))
    header[124:136] = field.ljust(12, b"\0")
    data = bytes(range(256)) * 2
    archive = _resum(bytes(header)) + data[:size] + bytes(padded(size)) + _member("l.txt", b"de")
    samples, _ = _read(archive + end_of_archive())
    assert [(s["__key__"], s.get("bin", s.get("txt"))) for s in samples] == [("k", data[:size]), ("l", b"de")]


def test_a_size_field_with_a_digit_that_is_not_octal_is_named(reader):
    header = bytearray(member_header("k.txt", 3))
    header[124:136] = b"18\0".ljust(12, b"\0")
    with pytest.raises(ShardReadError, match=r"corrupt tar header \(bad number b'18'\)"):
        _read(_resum(bytes(header)) + b"abc" + bytes(509) + end_of_archive())


def test_a_name_of_exactly_100_bytes_with_a_pax_size_keeps_the_name_field_and_no_pax_path():
    name = "n" * 96 + ".txt"
    header = member_header(name, USTAR_MAX + 1)
    with tarfile.open(fileobj=io.BytesIO(header + bytes(1024)), mode="r|") as tar:
        member = tar.next()
    assert (member.name, set(member.pax_headers)) == (name, {"size"})
    assert header[-512:][:100] == name.encode() and header[-512:][345:500] == bytes(155)


def test_a_long_name_is_cut_at_the_last_slash_that_fits_the_prefix():
    name = "a/" + "d" * 100 + "/" + "n" * 60 + ".txt"  # two slashes in the first 155 bytes: the later one
    header = member_header(name, 3)
    assert len(header) == 512
    assert header[345:500].rstrip(b"\0") == name[:102].encode()
    assert header[:100].rstrip(b"\0") == b"n" * 60 + b".txt"


def test_a_one_byte_rest_after_the_prefix_is_a_ustar_split_and_a_trailing_slash_never_is():
    short_rest = "d" * 120 + "/x"
    assert len(member_header(short_rest, 0)) == 512  # prefix "ddd...", name "x"
    with tarfile.open(fileobj=io.BytesIO(member_header(short_rest, 0) + bytes(1024)), mode="r|") as tar:
        assert tar.next().name == short_rest
    trailing = "d" * 120 + "/"
    assert len(member_header(trailing, 0)) == 3 * 512  # an empty name field would lose it: a pax path
