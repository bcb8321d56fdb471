"""Hostile sizes in tar headers (issue 32, items 1-3): a size field or pax size record that is not what GNU
tar reads as one, or that declares far more than the file holds, is damage named by shard and byte offset.
Never a hang, never an exception outside the StreamError family, never memory that follows the declared
size instead of the file. Every reader: the fused one (C fast path and pure Python), the header walk
behind ``shardstream index``, the dataset with ``on_error="skip"``."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import shardstream.format.tarread as tarread
from shardstream.errors import ShardReadError, StreamError
from shardstream.format import end_of_archive, member_header
from shardstream.format.scan import scan_file
from shardstream.format.tarheader import padded
from shardstream_cli import app
from streamer import ShardDataset

pytestmark = pytest.mark.timeout(60)  # a hang is the bug: fail, do not wait for CI's limit

# Size fields Python's int(field, 8) takes but GNU tar refuses (a sign, '_', a space inside), or refuses too.
BAD_SIZE_FIELDS = {
    "negative": b"-0000001000",  # 512 bytes back: the reader walked onto its own header forever
    "plus": b"+0000001000",
    "underscore": b"0000_001000",
    "eight": b"00000001800",
    "non-ascii": "00000\u0663\u0663".encode(),
}
# pax size records str.isdigit() takes but int() refuses, or that no file can hold.
BAD_PAX_SIZES = {
    "superscript": "\u00b2",
    "arabic-indic": "\u0663\u0663",
    "5000-digits": "9" * 5000,
    "negative": "-5",
    "exponent": "1e3",
}
HUGE_PAX_SIZES = {"2^40": str(1 << 40), "2^64": str(1 << 64), "2^64-1": str((1 << 64) - 1)}


def _resum(header: bytes) -> bytes:
    block = bytearray(header)
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def _member(name: str, data: bytes, header: bytes | None = None) -> bytes:
    return (header or member_header(name, len(data))) + data + bytes(padded(len(data)))


def _good(key: str) -> bytes:
    return _member(f"{key}.txt", f"text of {key}".encode()) + _member(f"{key}.cls", b"1")


def _with_size_field(field: bytes) -> bytes:
    """A member whose size field holds ``field`` (checksum valid), then 1,000 bytes of data."""
    header = bytearray(member_header("bad.txt", 1000))
    header[124:135] = field.ljust(11, b"0")[:11]
    return _member("bad.txt", bytes(1000), _resum(bytes(header)))


def _pax_record(key: str, value: str) -> bytes:
    """``"%d %s=%s\n"``, the length counting its own digits."""
    body = f" {key}={value}\n".encode()
    digits = len(str(len(body)))
    while len(str(len(body) + digits)) != digits:
        digits += 1
    return str(len(body) + digits).encode() + body


def _pax_header(size: int) -> bytes:
    """A pax extended header declaring ``size`` bytes of records (base-256 past 11 octal digits)."""
    header = bytearray(_typed(member_header("././@PaxHeader", size if size < 8**11 else 0), b"x"))
    if size >= 8**11:
        header[124:136] = b"\x80" + size.to_bytes(11, "big")
    return _resum(bytes(header))


def _with_pax_size(value: str) -> bytes:
    """A pax header whose size record is ``value`` before a plain member of 3 bytes."""
    records = _pax_record("size", value)
    return _member("", records, _pax_header(len(records))) + _member("bad.txt", b"abc")


def _typed(header: bytes, flag: bytes) -> bytes:
    block = bytearray(header)
    block[156:157] = flag
    return bytes(block)


def _base256_size(size: int) -> bytes:
    """A member whose size is GNU base-256 ``size`` (past what 11 octal digits hold), then 3 bytes."""
    header = bytearray(member_header("big.bin", 3))
    header[124:136] = b"\x80" + size.to_bytes(11, "big")
    return _member("big.bin", b"abc", _resum(bytes(header)))


def _shard(path: Path, bad: bytes) -> Path:
    path.write_bytes(_good("a") + bad + _good("b") + end_of_archive())
    return path


def _read_all(data: bytes) -> list[str]:
    return [s["__key__"] for s in tarread.iter_samples(io.BytesIO(data), url="shard.tar")]


@pytest.mark.parametrize("field", BAD_SIZE_FIELDS.values(), ids=BAD_SIZE_FIELDS.keys())
def test_a_size_field_gnu_tar_would_refuse_is_damage_at_its_header(reader, field):
    data = _good("a") + _with_size_field(field) + _good("b") + end_of_archive()
    with pytest.raises(ShardReadError, match=r"shard\.tar at byte 2048: corrupt tar header \(bad number"):
        _read_all(data)


@pytest.mark.parametrize("value", BAD_PAX_SIZES.values(), ids=BAD_PAX_SIZES.keys())
def test_a_pax_size_that_is_not_ascii_decimal_is_damage(reader, value):
    data = _good("a") + _with_pax_size(value) + _good("b") + end_of_archive()
    with pytest.raises(ShardReadError, match=r"shard\.tar at byte 2048: corrupt pax header \(size"):
        _read_all(data)


@pytest.mark.parametrize("value", HUGE_PAX_SIZES.values(), ids=HUGE_PAX_SIZES.keys())
def test_a_size_past_the_file_is_a_truncated_member_not_an_allocation(reader, value):
    data = _good("a") + _with_pax_size(value) + end_of_archive()
    with pytest.raises(ShardReadError, match="truncated tar"):
        _read_all(data)
    with pytest.raises(ShardReadError, match="truncated tar"):
        _read_all(_good("a") + _base256_size(1 << 40) + end_of_archive())


def _all_bad_shards(root: Path) -> list[Path]:
    root.mkdir()
    bad = [_with_size_field(f) for f in BAD_SIZE_FIELDS.values()]
    bad += [_with_pax_size(v) for v in (*BAD_PAX_SIZES.values(), *HUGE_PAX_SIZES.values())]
    bad.append(_base256_size(1 << 40))
    return [_shard(root / f"bad-{i:02d}.tar", member) for i, member in enumerate(bad)]


def test_the_header_walk_reports_every_bad_size_as_damage_and_raises_nothing(tmp_path):
    for shard in _all_bad_shards(tmp_path / "bad"):
        scan = scan_file(str(shard))
        assert scan.damage is not None and scan.damage_offset in (2048, 3072), (shard.name, scan)
        assert scan.damage.startswith(("corrupt tar header", "corrupt pax header", "truncated tar")), scan


def test_index_counts_the_bad_shards_and_indexes_the_good_ones(tmp_path):
    """One hostile shard among good ones must not stop `shardstream index` (it used to exit 1 and write
    nothing, or hang on a negative size)."""
    bad = _all_bad_shards(tmp_path / "data")
    for i in range(3):
        (tmp_path / "data" / f"good-{i}.tar").write_bytes(_good(f"g{i}") + end_of_archive())
    result = CliRunner().invoke(app, ["index", str(tmp_path / "data"), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["samples"] == 3 and report["shards"] == 3, report
    named = sorted(Path(problem["shard"]).name for problem in report["problems"])
    assert named == sorted(shard.name for shard in bad), report["problems"]


def test_a_dataset_skips_every_bad_shard_and_raises_only_stream_errors(tmp_path):
    """Without sidecars a sample is handed out when the next key shows; a member cut short (the declared
    size runs past the file) of another key still shows it, so sample ``a`` before it may be handed out,
    whole. What matters here: no other exception, nothing but ``a`` whole, every shard counted."""
    shards = _all_bad_shards(tmp_path / "data")
    ds = ShardDataset([str(s) for s in shards], decode=False, shuffle=False, on_error="skip")
    whole_a = {"__key__": "a", "txt": b"text of a", "cls": b"1"}
    assert all({k: v for k, v in s.items() if k != "__url__"} == whole_a for s in ds)
    assert ds.errors["shards_failed"] == len(shards), ds.errors
    for shard in shards:
        with pytest.raises(StreamError, match=shard.name):
            list(ShardDataset([str(shard)], decode=False, shuffle=False))


_PEAK = """
import json, resource, sys
from shardstream.format.scan import scan_file, scan_shard
from shardstream.format import iter_samples
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
for reader in ("scan", "stream", "iter"):
    try:
        if reader == "scan":
            print("damage" if scan_file(sys.argv[1]).damage else "clean", file=sys.stderr)
        elif reader == "stream":  # no length known (a remote shard): the walk cannot check ahead
            with open(sys.argv[1], "rb") as f:
                print("damage" if scan_shard(f, url=sys.argv[1]).damage else "clean", file=sys.stderr)
        else:
            with open(sys.argv[1], "rb") as f:
                list(iter_samples(f, url=sys.argv[1]))
    except Exception as exc:
        print(type(exc).__name__, file=sys.stderr)
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(json.dumps({"grown_mb": grown}))
"""


@pytest.mark.parametrize("declared", [1 << 30, 1 << 40])
def test_memory_follows_the_file_not_the_size_a_pax_header_declares(tmp_path, declared):
    """A 3 KB shard whose pax header declares 1 GiB took `index` and `stats` to 1.07 GB RSS."""
    shard = tmp_path / "liar.tar"
    pax = _pax_header(declared) + _pax_record("path", "liar.bin").ljust(512, b"\0")
    shard.write_bytes(_good("a") + pax + end_of_archive())
    assert shard.stat().st_size <= 4096
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, str(shard)], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stderr.split() == ["damage", "damage", "ShardReadError"], done.stderr
    assert json.loads(done.stdout)["grown_mb"] < 64, done.stdout
