"""The header walk and the key file, by invariants: the walk finds what a full read finds, on any tar
Python's tarfile writes (ustar, GNU long names, pax, directories), with the C fast path or without; every
key written is found at its first place."""

from __future__ import annotations

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
key_strategy = st.lists(segment, min_size=1, max_size=3).map("/".join).map(lambda k: k.replace(".", "_"))
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
