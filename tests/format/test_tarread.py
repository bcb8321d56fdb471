"""Reading tar shards into samples: every test runs on the C header fast path and on pure Python.

The C path (packer/format/_tarscan.c) declines what it does not read and Python takes over, so both
must agree on every archive: ours, tarfile's GNU, PAX and ustar, webdataset's, damaged ones.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shardstream.format.tarread as tarread
from shardstream.errors import ShardReadError
from shardstream.format import end_of_archive, member_header, member_size, split_member_name
from shardstream.format.tarheader import padded
from shardstream.format.tarread import iter_samples
from tests.conftest import SHARED

C_SCAN = tarread._member_at
IMPLEMENTATIONS = ["c", "python"]


@pytest.fixture(autouse=True, params=IMPLEMENTATIONS)
def implementation(request, monkeypatch):
    if request.param == "c":
        if C_SCAN is None:
            pytest.skip("packer/format/_tarscan.c is not built (no C compiler at install time)")
    else:
        monkeypatch.setattr(tarread, "_member_at", None)
    return request.param


def _both(archive: bytes, **kwargs):
    """iter_samples' samples and spans on each implementation, whichever the test runs on."""
    results = []
    for scan in (C_SCAN, None):
        original, tarread._member_at = tarread._member_at, scan
        try:
            spans: list = []
            results.append((list(iter_samples(io.BytesIO(archive), spans=spans, **kwargs)), spans))
        finally:
            tarread._member_at = original
    return results


names = st.one_of(
    st.from_regex(r"[a-z0-9_/-]{1,40}\.[a-z0-9]{1,5}", fullmatch=True),
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=300).map(
        lambda s: s.replace("\0", "x") + ".bin"
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(names, st.binary(max_size=2000)), min_size=1, max_size=6))
def test_hand_written_headers_read_back_with_tarfile_and_our_reader(members):
    archive = io.BytesIO()
    expected_size = 0
    for name, data in members:
        header = member_header(name, len(data))
        archive.write(header + data + b"\0" * padded(len(data)))
        expected_size += member_size(name, len(data))
    archive.write(end_of_archive())
    assert len(archive.getvalue()) == expected_size + 1024
    archive.seek(0)
    with tarfile.open(fileobj=archive, mode="r:") as tar:
        got = [(m.name, tar.extractfile(m).read()) for m in tar.getmembers()]
    assert got == list(members)
    archive.seek(0)
    assert list(iter_samples(archive, url="u")) == _grouped(members, "u")


def _grouped(members, url):
    """Consecutive members with one key make one sample (a repeated extension keeps the last data)."""
    samples = []
    for name, data in members:
        key, ext = split_member_name(name)
        if not samples or samples[-1]["__key__"] != key:
            samples.append({"__key__": key, "__url__": url})
        samples[-1][ext] = data
    return samples


def _names(samples):
    return [f"{s['__key__']}.{ext}" for s in samples for ext in s if not ext.startswith("__")]


def test_spans_give_each_samples_byte_range_and_ends_split_samples_early():
    archive = (
        b"".join(member_header(name, 3) + b"abc" + b"\0" * padded(3) for name in ("a.jpg", "a.txt", "b.jpg"))
        + end_of_archive()
    )
    spans = []
    assert _names(iter_samples(io.BytesIO(archive), spans=spans)) == ["a.jpg", "a.txt", "b.jpg"]
    assert spans == [(0, 2048), (2048, 3072)]
    # With ends, a sample is complete at its end byte, before the next member's header is read.
    early = iter_samples(io.BytesIO(archive[:2048] + b"\xff" * 512), ends=[2048, 3072])
    assert sorted(next(early)) == ["__key__", "__url__", "jpg", "txt"]
    # Ends that split one key's members, merge two keys or cut a member are a stale sidecar's: refused.
    for ends, found in (
        ([1024, 2048, 3072], "going on past its end"),
        ([3072], "another key"),
        ([1536], "runs on"),
    ):
        with pytest.raises(ShardReadError, match=f"the shard has .*{found}.*run `shardstream index` again"):
            list(iter_samples(io.BytesIO(archive), ends=ends))


def test_reader_names_offset_of_truncation_and_corruption():
    good = member_header("k.txt", 600) + b"x" * 600 + b"\0" * padded(600)
    with pytest.raises(ShardReadError, match=r"u member 'k.txt' at byte 0: truncated"):
        list(iter_samples(io.BytesIO(good[:900]), url="u"))
    damaged = bytearray(good + member_header("k2.txt", 1) + b"y" + b"\0" * 511)
    damaged[1536 + 10] ^= 0xFF
    with pytest.raises(ShardReadError, match="at byte 1536: corrupt tar header"):
        list(iter_samples(io.BytesIO(bytes(damaged)), url="u"))


@pytest.mark.parametrize("checksum_field", [b"%06o\0 ", b"%07o\0", b" %05o\0 "])
def test_reader_accepts_every_common_checksum_spelling(checksum_field):
    header = bytearray(member_header("k.txt", 1))
    header[148:156] = b" " * 8
    value = sum(header)
    header[148:156] = (checksum_field.decode() % value).encode()
    archive = bytes(header) + b"x" + b"\0" * 511 + end_of_archive()
    assert _names(iter_samples(io.BytesIO(archive))) == ["k.txt"]


def test_the_c_path_is_built_where_it_can_be():
    import shutil
    import sysconfig

    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not (shutil.which("cc") and headers.exists()):
        pytest.skip("no C compiler or no Python headers: the pure-Python reader is the one installed")
    assert C_SCAN is not None, "a C compiler and Python.h are here but packer/format/_tarscan.c was not built"


def test_the_c_path_declines_what_it_does_not_read_and_python_reads_it():
    if C_SCAN is None:
        pytest.skip("not built")
    plain = member_header("a/b.c.d", 5)
    assert C_SCAN(plain, 0) == (5, "a/b", "c.d", 512)
    assert C_SCAN(member_header("noext", 0), 0) == (0, "noext", "", 512)
    assert C_SCAN(b"\0" * 3 + plain, 3) == (5, "a/b", "c.d", 515)
    with pytest.raises(IndexError):
        C_SCAN(plain, 1)
    damaged = bytearray(plain)
    damaged[3] ^= 1
    assert C_SCAN(bytes(damaged), 0) is None  # bad checksum: Python raises with the offset
    directory = bytearray(plain)
    directory[156] = ord("5")
    assert C_SCAN(bytes(directory), 0) is None
    assert C_SCAN(bytes(512), 0) is None  # the end-of-archive block
    assert C_SCAN(member_header("d/" * 70 + "x.txt", 1), 0) is None  # a ustar prefix: Python joins it
    # A pax header and then the member's own: read in the same call, its path and size from the pax records.
    unicode = member_header("é" * 10 + "/k.txt", 1)
    assert C_SCAN(unicode, 0) == (1, "é" * 10 + "/k", "txt", len(unicode))
    assert C_SCAN(unicode[:-1], 0) is None  # the member's own header cut short: not in the window
    webdataset_style = io.BytesIO()
    with tarfile.open(fileobj=webdataset_style, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("k1.jpg")
        info.size, info.mtime = 3, 1_700_000_000.25  # a float mtime: a pax header of its own
        tar.addfile(info, io.BytesIO(b"abc"))
    assert C_SCAN(webdataset_style.getvalue(), 0) == (3, "k1", "jpg", 1536)
    gnu = io.BytesIO()
    with tarfile.open(fileobj=gnu, mode="w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("e/" * 60 + "y.txt")
        tar.addfile(info, io.BytesIO(b""))
    assert C_SCAN(gnu.getvalue(), 0) is None  # a GNU long name ('L'): Python reads it


formats = st.sampled_from([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
tar_names = st.one_of(
    st.from_regex(r"[a-z0-9]{1,8}(/[a-z0-9]{1,8}){0,3}(\.[a-z]{1,4}){0,2}", fullmatch=True),
    # long directories: a ustar prefix field, a GNU long name or a pax path, by format
    st.builds(
        lambda depth, stem: "d" * depth + "/" + stem + ".jpg",
        st.integers(90, 160),
        st.text("ab", min_size=1, max_size=5),
    ),
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=60).map(
        lambda s: s.replace("\0", "x").strip("/") or "x"
    ),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(tar_names, st.binary(max_size=3000)), min_size=1, max_size=8), formats)
def test_c_and_python_agree_on_tarfiles_archives(members, tar_format):
    archive = io.BytesIO()
    try:
        with tarfile.open(fileobj=archive, mode="w", format=tar_format) as tar:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    except (ValueError, UnicodeEncodeError):
        return  # a name this format cannot hold
    (c_samples, c_spans), (py_samples, py_spans) = _both(archive.getvalue())
    assert c_samples == py_samples and c_spans == py_spans
    with tarfile.open(fileobj=io.BytesIO(archive.getvalue())) as tar:
        expected = [(m.name, tar.extractfile(m).read()) for m in tar.getmembers()]
    assert py_samples == _grouped(expected, "<stream>")


@pytest.mark.parametrize("name", sorted(p.name for p in (SHARED / "foreign-shards").glob("*.tar")))
def test_c_and_python_agree_on_foreign_shards(name):
    (c_samples, c_spans), (py_samples, py_spans) = _both(Path(SHARED / "foreign-shards" / name).read_bytes())
    assert c_samples == py_samples and c_spans == py_spans and c_samples


def test_a_forked_worker_never_writes_into_its_parents_buffers():
    import io as _io
    import os

    from shardstream.format import window

    parent = window.ReadWindow(_io.BytesIO(b"p" * 4096))
    parent.fill(4096)
    spare = window.ReadWindow(_io.BytesIO(b"s" * 4096))
    spare.fill(4096)
    spare_buffer = spare.buf
    spare.release()  # into the pool a forked child would take from
    pid = os.fork()
    if pid == 0:  # the child: overwrite both, as a DataLoader worker reading other shards would
        try:
            parent.buf[:4096] = b"c" * 4096
            child = window.ReadWindow(_io.BytesIO(b"c" * 4096))
            child.fill(4096)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert parent.buf[:4096] == b"p" * 4096
    assert spare_buffer[:4096] == b"s" * 4096
