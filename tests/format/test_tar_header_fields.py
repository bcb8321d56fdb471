"""Tar headers carry fixed metadata: mtime, uid/gid 0, mode 0644, empty uname/gname, in every header block."""

from __future__ import annotations

import tarfile

import pytest

from packer import PackOptions, pack
from shardstream.format import end_of_archive, member_header
from shardstream.format.constants import FIXED_MTIME
from tests.conftest import shard_paths

LONG_DIR = "d" * 60 + "/" + "e" * 60  # over 100 bytes: split into ustar prefix + name
NAMES = {
    "plain": "a/0001.txt",
    "prefix": f"{LONG_DIR}/0002.txt",
    "pax-long": "f" * 120 + ".txt",  # one component over 100 bytes: a pax path record
    "pax-unicode": "ünï/cödé.txt",
}


def _blocks(data: bytes):
    """(offset, header block) for every header in a tar, pax extended headers included."""
    position = 0
    while data[position : position + 512] != b"\0" * 512:
        header = data[position : position + 512]
        yield position, header
        size = int(header[124:136].rstrip(b"\0 ") or b"0", 8)
        position += 512 + -(-size // 512) * 512


def _check_fixed_fields(header: bytes) -> None:
    assert header[100:108] == b"0000644\0"  # mode
    assert header[108:116] == b"0000000\0" and header[116:124] == b"0000000\0"  # uid, gid
    assert header[136:148] == b"%011o\0" % FIXED_MTIME
    assert header[265:297] == bytes(32) and header[297:329] == bytes(32)  # uname, gname
    assert header[329:345] == bytes(16)  # devmajor, devminor
    assert header[257:265] == b"ustar\x0000"


@pytest.mark.parametrize("kind", list(NAMES))
def test_every_header_block_has_the_fixed_fields(kind):
    data = member_header(NAMES[kind], 3) + b"abc" + bytes(509) + end_of_archive()
    blocks = list(_blocks(data))
    assert [h[156:157] for _, h in blocks] == ([b"x", b"0"] if kind.startswith("pax") else [b"0"])
    for _, header in blocks:
        _check_fixed_fields(header)


def test_packed_shards_read_back_with_fixed_metadata(tmp_path):
    src = tmp_path / "src"
    for name in NAMES.values():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(name.encode() * 3)
        (src / name).chmod(0o600)
        (src / name).with_suffix(".json").write_text("{}")
    summary = pack(src, tmp_path / "out", PackOptions(max_count=2))
    assert summary.samples == len(NAMES)
    seen = []
    for shard in shard_paths(tmp_path / "out"):
        data = shard.read_bytes()
        for _, header in _blocks(data):
            _check_fixed_fields(header)
        with tarfile.open(shard) as tar:
            for member in tar:
                seen.append(member.name)
                assert member.isreg()
                assert (member.mtime, member.uid, member.gid, member.mode) == (FIXED_MTIME, 0, 0, 0o644)
                assert (member.uname, member.gname) == ("", "")
                assert set(member.pax_headers) <= {"path"}
    assert sorted(seen) == sorted([*NAMES.values(), *(n[:-4] + ".json" for n in NAMES.values())])
