"""The header walk and the key file, by invariants: the walk finds what a full read finds, on any tar
Python's tarfile writes (ustar, GNU long names, pax, directories), with the C fast path or without; every
key written is found at its first place."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardstream.format import iter_samples
from shardstream.format import keyfile as keyfile_module
from shardstream.format import scan as scan_module
from shardstream.format.keyfile import KeyFile, KeyFileWriter, key_line
from shardstream.format.scan import scan_file, scan_shard

segment = st.text(alphabet="abcXYZ019_-é", min_size=1, max_size=8)
folder = st.text(alphabet="ab.9é", min_size=1, max_size=6).filter(lambda f: f not in (".", ".."))
# Dots may sit in folder names (the key runs to the first dot after the last slash), not in the last part.
key_strategy = st.builds(
    lambda folders, last: "/".join([*folders, last.replace(".", "_")]), st.lists(folder, max_size=2), segment
)
member = st.tuples(st.sampled_from(["jpg", "txt", "json", "0.png", "tar.gz", ""]), st.integers(0, 2000))
sample_strategy = st.tuples(key_strategy, st.lists(member, min_size=1, max_size=3, unique_by=lambda m: m[0]))


def write_tar(samples, fmt: int, *, dirs: bool, long_prefix: int) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=fmt) as tar:
        seen = set()
        for n, (key, members) in enumerate(samples):
            key = f"{'d' * long_prefix}/{key}{n}" if long_prefix else f"{key}{n}"
            if dirs and "/" in key and key.rsplit("/", 1)[0] not in seen:
                info = tarfile.TarInfo(key.rsplit("/", 1)[0])
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
                seen.add(key.rsplit("/", 1)[0])
            for ext, size in members:
                info = tarfile.TarInfo(f"{key}.{ext}" if ext else key)
                info.size = size
                info.mtime = 1_000_000_000.5 if fmt == tarfile.PAX_FORMAT else 1_000_000_000
                tar.addfile(info, io.BytesIO(bytes([n % 251]) * size))
    return buffer.getvalue()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    samples=st.lists(sample_strategy, min_size=0, max_size=12),
    fmt=st.sampled_from([tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT]),
    dirs=st.booleans(),
    long_prefix=st.sampled_from([0, 0, 120, 200]),
    native=st.booleans(),
)
def test_the_header_walk_finds_what_a_full_read_finds(tmp_path, samples, fmt, dirs, long_prefix, native):
    if fmt == tarfile.USTAR_FORMAT and long_prefix > 150:
        long_prefix = 120  # ustar holds at most 155 + 100 bytes of name
    data = write_tar(samples, fmt, dirs=dirs, long_prefix=long_prefix)
    path = tmp_path / "t.tar"
    path.write_bytes(data)
    full = list(iter_samples(io.BytesIO(data), url="t"))
    saved = scan_module._member_at
    scan_module._member_at = saved if native else None  # the C fast path, or every header in Python
    try:
        scans = (scan_file(path), scan_shard(io.BytesIO(data), url="t", checksum=True))
    finally:
        scan_module._member_at = saved
    digest = hashlib.sha256(data).hexdigest()
    assert [scan.sha256 for scan in scans] == ["", digest]
    for scan in scans:
        assert scan.damage is None and scan.size == len(data)
        assert scan.keys == [s["__key__"] for s in full]
        # Each span, read alone with the sidecar's end, gives back exactly that sample.
        for i, sample in enumerate(full):
            start, end = scan.offsets[i], scan.offsets[i + 1]
            alone = list(iter_samples(io.BytesIO(data[start:end]), url="t", start=start, ends=[end]))
            assert alone == [sample]
        counts = {}
        for sample in full:
            for ext, value in sample.items():
                if not ext.startswith("__"):
                    counts[ext] = [counts.get(ext, [0, 0])[0] + 1, counts.get(ext, [0, 0])[1] + len(value)]
        assert scan.fields == counts


@settings(max_examples=60, deadline=None)
@given(samples=st.lists(sample_strategy, min_size=2, max_size=10), cut=st.floats(0.05, 0.95))
def test_damage_keeps_only_whole_samples_before_it(samples, cut):
    data = write_tar(samples, tarfile.PAX_FORMAT, dirs=False, long_prefix=0)
    at = int(len(data) * cut) | 1  # never on a block boundary: a clean cut there reads as a short tar
    scan = scan_shard(io.BytesIO(data[:at]), url="t")
    full = list(iter_samples(io.BytesIO(data), url="t"))
    if scan.damage is None:  # the cut fell in the end-of-archive blocks
        assert scan.keys == [s["__key__"] for s in full]
        return
    assert scan.damage_offset is not None and scan.damage_offset <= at
    kept = scan.samples
    assert scan.keys == [s["__key__"] for s in full[:kept]] and kept < len(full)
    assert not kept or scan.offsets[kept] <= at
    for i in range(kept):  # every sample kept is whole, and the counts cover those alone
        start, end = scan.offsets[i], scan.offsets[i + 1]
        assert list(iter_samples(io.BytesIO(data[start:end]), url="t", start=start, ends=[end])) == [full[i]]
    counts: dict[str, list[int]] = {}
    for sample in full[:kept]:
        for ext, value in sample.items():
            if not ext.startswith("__"):
                counts.setdefault(ext, [0, 0])
                counts[ext][0] += 1
                counts[ext][1] += len(value)
    assert scan.fields == counts


@settings(max_examples=80, deadline=None)
@given(keys=st.lists(st.text(max_size=12), min_size=1, max_size=300), data=st.data())
def test_every_key_is_found_at_its_first_place(tmp_path_factory, keys, data):
    folder = tmp_path_factory.mktemp("keys")
    path = folder / "shardstream-keys"
    places = {}
    lines = []
    for n, key in enumerate(keys):
        line = key_line(key, n // 7, n % 7)
        if line is None:
            continue
        lines.append(line)
        places.setdefault(key, (n // 7, n % 7))
    original = keyfile_module.BLOCK_TARGET
    keyfile_module.BLOCK_TARGET = data.draw(st.sampled_from([1, 40, 4096]))  # many blocks, or one
    try:
        with KeyFileWriter(path) as writer:
            writer.add_all(sorted(lines))
    finally:
        keyfile_module.BLOCK_TARGET = original
    body = path.read_bytes()
    reads = []

    def read_range(start: int, end: int) -> bytes:
        reads.append((start, end))
        return body[start:end]

    keys_file = KeyFile((folder / "shardstream-keys.idx").read_bytes(), read_range)
    for key, place in places.items():
        assert keys_file.lookup(key) == place
    assert writer.repeated == len(lines) - len(places)
    assert len(reads) == len(places)  # one block read per lookup
    absent = data.draw(st.text(max_size=12))
    if absent not in places:
        assert keys_file.lookup(absent) is None


def test_keys_out_of_order_are_refused(tmp_path):
    with pytest.raises(Exception, match="out of order"), KeyFileWriter(tmp_path / "k") as writer:
        writer.add_all([key_line("b", 0, 0), key_line("a", 0, 1)])
    assert not list(Path(tmp_path).iterdir())  # nothing published


class Trickle(io.RawIOBase):
    """A stream that hands out at most ``step`` bytes a read, as a network socket does."""

    def __init__(self, data: bytes, step: int) -> None:
        self.data, self.step, self.at = data, step, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        count = min(len(buffer), self.step, len(self.data) - self.at)
        buffer[:count] = self.data[self.at : self.at + count]
        self.at += count
        return count


def big_tar(member_sizes: list[int]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for n, size in enumerate(member_sizes):
            info = tarfile.TarInfo(f"s{n // 2:04d}.{'ab'[n % 2]}")
            info.size, info.mtime = size, 1_000_000_000.5
            tar.addfile(info, io.BytesIO(bytes([n % 251]) * size))
    return buffer.getvalue()


@pytest.mark.parametrize("native", [True, False])
def test_a_walk_across_many_windows_seeks_streams_and_hashes_alike(tmp_path, native, monkeypatch):
    # Members around the 1 MiB window and the 64 KiB read after a jump, so headers fall on every side of
    # a window's end, plus small ones in between.
    sizes = [700, (1 << 20) - 300, 5, 3 << 20, 64 << 10, 100, (1 << 20) + 511, 1, 70_000, 2, 900_000, 513]
    data = big_tar(sizes)
    path = tmp_path / "big.tar"
    path.write_bytes(data)
    full = list(iter_samples(io.BytesIO(data), url="t"))
    if not native:
        monkeypatch.setattr(scan_module, "_member_at", None)
    scans = [
        scan_file(path),
        scan_file(path, checksum=True),
        scan_shard(Trickle(data, 4099), url="t"),
        scan_shard(Trickle(data, 300_000), url="t", checksum=True),
    ]
    digest = hashlib.sha256(data).hexdigest()
    for scan in scans:
        assert scan.damage is None and scan.size == len(data)
        assert scan.keys == [s["__key__"] for s in full] and scan.samples == len(sizes) // 2
        assert scan.fields == {"a": [6, sum(sizes[0::2])], "b": [6, sum(sizes[1::2])]}
        for i, sample in enumerate(full):
            start, end = scan.offsets[i], scan.offsets[i + 1]
            alone = iter_samples(io.BytesIO(data[start:end]), url="t", start=start, ends=[end])
            assert list(alone) == [sample]
    assert [s.sha256 for s in scans] == ["", digest, "", digest]


def test_a_tar_without_its_end_blocks_is_whole_and_one_cut_inside_a_header_is_damage(tmp_path):
    data = big_tar([10, 20, 30, 40])
    bare = data[: data.rindex(b"\0" * 1024, 0, len(data)) // 512 * 512]
    while bare.endswith(bytes(512)):
        bare = bare[:-512]
    full = list(iter_samples(io.BytesIO(data), url="t"))
    for scan in (scan_shard(io.BytesIO(bare), url="t"), scan_shard(io.BytesIO(bare), url="t", checksum=True)):
        assert scan.damage is None and scan.keys == [s["__key__"] for s in full] and scan.size == len(bare)
    (tmp_path / "bare.tar").write_bytes(bare)
    assert scan_file(tmp_path / "bare.tar").offsets == scan_shard(io.BytesIO(bare), url="t").offsets
    cut = bare + bare[-1024:-700]  # a header's first bytes after the last member
    scan = scan_shard(io.BytesIO(cut), url="t")
    assert (scan.damage, scan.damage_offset) == ("truncated tar header", len(bare))


def _pax_member(records: bytes, name: str = "k.txt", data: bytes = b"abc") -> bytes:
    from shardstream.format.tarheader import _raw_header

    pax = _raw_header(b"././@PaxHeader", b"", len(records), b"x") + records + bytes(-len(records) % 512)
    return pax + _raw_header(name.encode(), b"", len(data), b"0") + data + bytes(-len(data) % 512)


def _plain(name: str, data: bytes) -> bytes:
    from shardstream.format.tarheader import member_header

    return member_header(name, len(data)) + data + bytes(-len(data) % 512)


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize(
    ("damage", "message", "offset"),
    [
        ("checksum", "corrupt tar header (checksum mismatch)", 1024),
        ("pax-size", "corrupt pax header (size '12x')", 1024),
        ("pax-record", "corrupt pax header (malformed pax record at byte 0 of 9: b'99 path=x')", 1024),
        ("cut-data", "truncated tar: member needs 2048 bytes with its header, 1100 remain", 1024),
        ("cut-pax", "truncated tar: a pax or long-name header", 1024),
    ],
)
def test_each_kind_of_damage_is_named_where_it_is(tmp_path, native, monkeypatch, damage, message, offset):
    good = _plain("a.txt", b"x" * 10)  # one whole sample before the damage, 1024 bytes
    bad = {
        "checksum": _plain("b.txt", b"y")[:100] + b"Z" + _plain("b.txt", b"y")[101:],
        "pax-size": _pax_member(b"12 size=12x\n" + b"0" * 0),
        "pax-record": _pax_member(b"99 path=x"),
        "cut-data": _plain("b.bin", b"z" * 1500)[:1100],
        "cut-pax": _pax_member(b"19 path=b/long.txt\n")[:520],
    }[damage]
    data = good + bad
    if not native:
        monkeypatch.setattr(scan_module, "_member_at", None)
    path = tmp_path / "d.tar"
    path.write_bytes(data)
    for scan in (scan_file(path), scan_shard(io.BytesIO(data), url=str(path))):
        if damage == "cut-data" and "stream ends" in (scan.damage or ""):  # a stream cannot know the length
            assert scan.damage == (
                "truncated tar: the stream ends before byte 3072, inside the data of the "
                "member whose header is here"
            )
            assert scan.damage_offset == offset
        else:
            assert (scan.damage, scan.damage_offset) == (message, offset)
        if damage == "cut-data":  # the cut member's key is known: the sample before it is whole
            assert scan.keys == ["a"] and list(scan.offsets) == [0, 1024] and scan.fields == {"txt": [1, 10]}
        else:  # a damaged header may have been one more member of "a": it is dropped too
            assert scan.keys == [] and list(scan.offsets) == [] and scan.fields == {}


@pytest.mark.parametrize("native", [True, False])
def test_a_pax_size_record_wins_over_the_header_field(native, monkeypatch):
    from shardstream.format.tarheader import _raw_header

    records = b"10 size=3\n"
    pax = _raw_header(b"././@PaxHeader", b"", len(records), b"x") + records + bytes(512 - len(records))
    member = pax + _raw_header(b"k.bin", b"", 0, b"0") + b"abc" + bytes(509)  # the header field says 0
    data = member + _plain("m.txt", b"hello") + bytes(1024)
    if not native:
        monkeypatch.setattr(scan_module, "_member_at", None)
    scan = scan_shard(io.BytesIO(data), url="t")
    assert scan.damage is None and scan.keys == ["k", "m"] and list(scan.offsets) == [0, 2048, 3072]
    assert scan.fields == {"bin": [1, 3], "txt": [1, 5]}
    assert [s["__key__"] for s in iter_samples(io.BytesIO(data), url="t")] == ["k", "m"]


@pytest.mark.parametrize("target", [38, 40])
def test_the_key_file_layout_is_pinned(tmp_path, monkeypatch, target):
    monkeypatch.setattr(keyfile_module, "BLOCK_TARGET", target)
    places = [("a", 0, 1), ("a", 1, 0), ("b", 0, 0), ("c", 2, 3), ("d", 0, 9)]
    lines = [key_line(k, s, i) for k, s, i in places]  # 19 bytes each
    with KeyFileWriter(tmp_path / "k") as writer:
        writer.add_all(lines[:2])
        writer.add(lines[2])
        writer.add_all(lines[3:])
    assert (tmp_path / "k").read_bytes() == b"".join(lines)
    assert lines[0] == b"a\x000000000000000001\n"
    # A block starts at the first line, then at the first new key `target` bytes or more past the block's
    # start (38: b at 38, d at 76; 40: c at 57); the last line closes the index with the data's length.
    blocks = (
        [b"b\x000000000000000026\n", b"d\x00000000000000004c\n"]
        if target == 38
        else [b"c\x000000000000000039\n"]
    )
    expected = b"a\x000000000000000000\n" + b"".join(blocks) + b"\x00000000000000005f\n"
    assert (tmp_path / "k.idx").read_bytes() == expected
    assert writer.lines == 5 and writer.repeated == 1 and not list(tmp_path.glob(".*.tmp"))


def test_a_long_run_of_lines_flushes_in_pieces_and_reads_back(tmp_path):
    lines = sorted(key_line(f"k{i:06d}", 10 + i // 1000, i % 1000) for i in range(10_000))
    with KeyFileWriter(tmp_path / "k") as writer:
        writer.add_all(iter(lines))
    body = (tmp_path / "k").read_bytes()
    assert body == b"".join(lines)
    keys = KeyFile((tmp_path / "k.idx").read_bytes(), lambda a, b: body[a:b])
    assert keys.length == len(body) and len(keys.first_keys) == -(-len(body) // keyfile_module.BLOCK_TARGET)
    assert keys.lookup("k009999") == (19, 999) and keys.lookup("k000000") == (10, 0)
    assert keys.lookup("k0099990") is None and keys.lookup("a") is None and keys.lookup("z") is None


def test_keys_that_cannot_be_written_are_none_and_never_found(tmp_path):
    assert key_line("a\nb", 0, 0) is None and key_line("a\0b", 0, 0) is None
    with KeyFileWriter(tmp_path / "k") as writer:
        writer.add_all([key_line("b", 0, 0), key_line("b\udcff", 0, 1)])  # a name in another encoding
    body = (tmp_path / "k").read_bytes()
    reads = []
    keys = KeyFile((tmp_path / "k.idx").read_bytes(), lambda a, b: reads.append(a) or body[a:b])
    assert keys.lookup("b\n") is None and keys.lookup("b\0") is None and keys.lookup("b") == (0, 0)
    assert keys.lookup("b\udcff") == (0, 1)
    reads.clear()
    assert keys.lookup("a") is None and not reads  # before the first block: nothing to read


@pytest.mark.parametrize("idx", [b"", b"a\x000000000000000000\n", b"a\x00zz\n\x000000000000000001\n"])
def test_a_damaged_block_index_is_a_format_error(idx):
    from shardstream.errors import FormatError

    with pytest.raises(FormatError, match=r"keys\.idx"):
        KeyFile(idx, lambda a, b: b"")


def test_a_block_cut_short_is_a_format_error():
    from shardstream.errors import FormatError

    idx = b"a\x000000000000000000\n\x000000000000000005\n"
    with pytest.raises(FormatError, match=r"^https://h/keys: a line cut short in block 0$"):
        KeyFile(idx, lambda a, b: b"a\x000000", source="https://h/keys").lookup("a")


@pytest.mark.parametrize("step", [7, 1 << 20])
def test_bytes_after_the_end_blocks_count_in_a_streams_size_and_hash(step):
    data = big_tar([10, 20, 30, 40]) + b"trailing bytes some writers leave" * 40_000
    for checksum in (False, True):
        scan = scan_shard(Trickle(data, step), url="t", checksum=checksum)
        assert scan.damage is None and scan.size == len(data) and scan.samples == 2
        assert scan.sha256 == (hashlib.sha256(data).hexdigest() if checksum else "")
