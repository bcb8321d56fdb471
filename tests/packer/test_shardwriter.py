"""The shard writer: size and count caps at their exact boundaries, tar bytes, offsets, abort and publish."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tarfile
import warnings
from pathlib import Path

import pytest

from packer import PackOptions, pack
from packer.sample import Sample
from packer.shardwriter import TarShardWriter, encode_sample
from shardstream.format import REJECTS_NAME, DatasetIndex, decode_offsets, offsets_name

# A 100-byte file packs as a 512-byte header plus one padded block: 1024 tar bytes per sample.
SAMPLE = 1024
END = 1024


def _folder(root: Path, sizes: list[int]) -> Path:
    root.mkdir(parents=True)
    for i, size in enumerate(sizes):
        (root / f"{i:03d}.bin").write_bytes(bytes([65 + i % 26]) * size)
    return root


def _shards(summary) -> list[tuple[int, int]]:
    return [(e.samples, e.size) for e in DatasetIndex.load(summary.index).shards]


def _add(writer: TarShardWriter, sample: Sample) -> int:
    chunks = encode_sample(sample)
    nbytes = sum(len(c) for c in chunks)
    writer.add(sample.key, chunks, nbytes)
    return nbytes


def test_a_shard_that_lands_exactly_on_max_size_is_filled(tmp_path):
    src = _folder(tmp_path / "src", [100] * 5)
    exact = pack(src, tmp_path / "exact", PackOptions(max_size=2 * SAMPLE + END))
    assert _shards(exact) == [(2, 3072), (2, 3072), (1, 2048)]
    one_less = pack(src, tmp_path / "less", PackOptions(max_size=2 * SAMPLE + END - 1))
    assert _shards(one_less) == [(1, 2048)] * 5
    assert exact.oversized == one_less.oversized == 0


def test_max_count_is_reached_exactly_and_never_passed(tmp_path):
    src = _folder(tmp_path / "src", [100] * 7)
    summary = pack(src, tmp_path / "out", PackOptions(max_size=None, max_count=3))
    assert _shards(summary) == [(3, 3 * SAMPLE + END), (3, 3 * SAMPLE + END), (1, SAMPLE + END)]
    both = pack(src, tmp_path / "both", PackOptions(max_size=2 * SAMPLE + END, max_count=3))
    assert [n for n, _ in _shards(both)] == [2, 2, 2, 1]  # the tighter of the two caps wins
    by_count = pack(src, tmp_path / "by-count", PackOptions(max_size=10 * SAMPLE, max_count=3))
    assert [n for n, _ in _shards(by_count)] == [3, 3, 1]


def test_fits_checks_both_caps_at_their_boundaries(tmp_path):
    writer = TarShardWriter(tmp_path / "s.tar", max_size=3 * SAMPLE + END, max_count=2)
    assert writer.fits(3 * SAMPLE) and not writer.fits(3 * SAMPLE + 1)
    _add(writer, Sample("a", "a", (("bin", b"a" * 100),)))
    assert writer.fits(2 * SAMPLE) and not writer.fits(2 * SAMPLE + 1)
    _add(writer, Sample("b", "b", (("bin", b"b" * 100),)))
    assert not writer.fits(0), "max_count=2 is reached: not even an empty sample may join"
    writer.abort()
    unlimited = TarShardWriter(tmp_path / "u.tar", max_size=None, max_count=None)
    assert unlimited.fits(10**12)
    for i in range(3):
        _add(unlimited, Sample(f"k{i}", "k", (("bin", b"x"),)))
    assert unlimited.fits(10**12)
    unlimited.abort()


@pytest.mark.parametrize("position", ["first", "middle", "last"])
def test_an_oversized_sample_gets_a_shard_to_itself_wherever_it_comes(tmp_path, position):
    sizes = [100] * 4
    sizes[{"first": 0, "middle": 2, "last": 3}[position]] = 6000
    src = _folder(tmp_path / "src", sizes)
    big = 512 + 6144  # header + 6000 bytes padded to 12 blocks
    with pytest.warns(UserWarning, match=rf"takes {big + END} bytes, over max_size=3072"):
        summary = pack(src, tmp_path / "out", PackOptions(max_size=3072))
    expected = {
        "first": [(1, big + END), (2, 3072), (1, 2048)],
        "middle": [(2, 3072), (1, big + END), (1, 2048)],
        "last": [(2, 3072), (1, 2048), (1, big + END)],
    }
    assert _shards(summary) == expected[position] and summary.oversized == 1


def test_two_oversized_samples_in_a_row_get_one_shard_each(tmp_path):
    src = _folder(tmp_path / "src", [100, 6000, 6000, 100])
    with pytest.warns(UserWarning):
        summary = pack(src, tmp_path / "out", PackOptions(max_size=3072))
    big = 512 + 6144 + END
    assert _shards(summary) == [(1, 2048), (1, big), (1, big), (1, 2048)]
    assert summary.oversized == 2


def test_a_sample_that_exactly_fills_an_empty_shard_is_not_oversized(tmp_path):
    src = _folder(tmp_path / "src", [100, 100])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = pack(src, tmp_path / "out", PackOptions(max_size=SAMPLE + END))
    assert _shards(summary) == [(1, 2048), (1, 2048)] and summary.oversized == 0


def test_members_of_every_padding_length_read_back_and_offsets_point_at_each_sample(tmp_path):
    sizes = [0, 1, 511, 512, 513, 1024, 1500]
    samples = [
        Sample(f"k{i}", f"src{i}", (("bin", os.urandom(size)), ("txt", b"t" * (i + 1))))
        for i, size in enumerate(sizes)
    ]
    path = tmp_path / "train-000000.tar"
    writer = TarShardWriter(path, max_size=None, max_count=None)
    total = 0
    for sample in samples:
        total += _add(writer, sample)
    assert writer.count == len(samples) and writer.size == total
    entry = writer.close()
    data = path.read_bytes()
    assert entry.name == path.name and entry.samples == len(samples)
    assert entry.size == len(data) == total + END and data.endswith(b"\0" * END)
    assert entry.sha256 == hashlib.sha256(data).hexdigest()
    with tarfile.open(path) as tar:
        members = tar.getmembers()
        got = [(m.name, tar.extractfile(m).read()) for m in members]
    assert got == [(f"{s.key}.{ext}", blob) for s in samples for ext, blob in s.members]
    offsets = decode_offsets((tmp_path / offsets_name(path.name)).read_bytes(), samples=len(samples))
    starts = [m.offset for m in members if m.name.endswith(".bin")]
    assert list(offsets) == [*starts, total]
    listed = subprocess.run(["tar", "tf", str(path)], capture_output=True, text=True, check=True)
    assert listed.stdout.split() == [name for name, _ in got]


def test_abort_removes_the_temp_file_closes_it_and_may_be_repeated(tmp_path):
    fds = set(os.listdir("/proc/self/fd"))
    writer = TarShardWriter(tmp_path / "train-000000.tar", max_size=None, max_count=None)
    _add(writer, Sample("k", "k", (("txt", b"x" * 100),)))
    assert [p.name for p in tmp_path.iterdir()] == [".train-000000.tar.tmp"]
    writer.abort()
    writer.abort()
    assert list(tmp_path.iterdir()) == []
    assert set(os.listdir("/proc/self/fd")) <= fds, "abort leaked the temp file's descriptor"


def test_abort_after_close_leaves_the_published_shard(tmp_path):
    writer = TarShardWriter(tmp_path / "train-000000.tar", max_size=None, max_count=None)
    _add(writer, Sample("k", "k", (("txt", b"x" * 100),)))
    entry = writer.close()
    writer.abort()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train-000000.tar", "train-000000.tar.offsets"]
    assert (tmp_path / "train-000000.tar").stat().st_size == entry.size


def test_as_a_context_manager_an_error_aborts_and_a_clean_exit_keeps_the_shard(tmp_path):
    final = tmp_path / "train-000000.tar"
    with pytest.raises(RuntimeError, match="boom"), TarShardWriter(final, max_size=None, max_count=None) as w:
        _add(w, Sample("k", "k", (("txt", b"x" * 100),)))
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    with TarShardWriter(final, max_size=None, max_count=None) as w:
        _add(w, Sample("k", "k", (("txt", b"x" * 100),)))
        entry = w.close()
    assert final.stat().st_size == entry.size == 2048
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train-000000.tar", "train-000000.tar.offsets"]


def test_the_keys_a_shard_holds_catch_repeats_within_it_and_across_shards(tmp_path):
    manifest = tmp_path / "m.jsonl"
    ids = ["a", "b", "a", "c", "d", "b"]  # shards of 2: [a, b] (second a refused), [c, d], [b]
    manifest.write_text("".join(json.dumps({"id": key, "text": f"t{i}"}) + "\n" for i, key in enumerate(ids)))
    summary = pack(manifest, tmp_path / "out", PackOptions(max_size=None, max_count=2))
    assert [n for n, _ in _shards(summary)] == [2, 2, 1]
    assert summary.rejected == {"duplicate-key": 1} and summary.duplicate_keys == 1
    rejects = [json.loads(line) for line in (tmp_path / "out" / REJECTS_NAME).read_text().splitlines()]
    assert [(r["kind"], r["source"].rsplit(" ", 1)[-1]) for r in rejects] == [
        ("duplicate-key", "2"),
        ("duplicate-key-across-shards", "b"),
    ]
    assert "train-000000.tar, train-000002.tar" in rejects[1]["reason"]
