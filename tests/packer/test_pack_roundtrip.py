"""Pack then read: webdataset, tarfile and GNU tar get back every sample, byte for byte; shards obey caps."""

from __future__ import annotations

import hashlib
import subprocess

import pytest

from packer import PackOptions, pack, verify_dataset
from packer.media import MediaOptions
from shardstream.format import DatasetIndex, decode_offsets, offsets_name
from tests.conftest import (
    expected_from_directory,
    expected_from_manifest,
    read_with_tarfile,
    read_with_webdataset,
    shard_paths,
)

MAX_SIZE = 40_000


@pytest.mark.parametrize("kind", ["directory", "manifest"])
def test_round_trip_is_byte_identical_for_every_reader(corpus, tmp_path, kind):
    source = corpus.files_dir if kind == "directory" else corpus.manifest
    expected = (expected_from_directory if kind == "directory" else expected_from_manifest)(source)
    exts = {ext.rsplit(".", 1)[-1] for members in expected.values() for ext in members}
    assert {"jpg", "png", "webp", "wav", "flac", "mp4", "json"} <= exts
    summary = pack(source, tmp_path, PackOptions(max_size=MAX_SIZE))
    assert summary.samples == len(expected) == corpus.samples
    assert summary.skipped == 0 and summary.shards > 2
    shards = shard_paths(tmp_path)
    assert len(shards) == summary.shards
    assert read_with_webdataset(str(tmp_path / summary.pattern)) == expected
    assert read_with_tarfile(shards) == expected
    for shard in shards:
        listed = subprocess.run(["tar", "tf", str(shard)], capture_output=True, text=True, check=True)
        with_tarfile = read_with_tarfile([shard])
        assert len(listed.stdout.splitlines()) == sum(len(m) for m in with_tarfile.values())


def test_shards_respect_max_size_and_index_matches_files(corpus, tmp_path):
    summary = pack(corpus.files_dir, tmp_path, PackOptions(max_size=MAX_SIZE))
    index = DatasetIndex.load(tmp_path / "shardstream-index.json")
    assert index.pattern == summary.pattern == f"train-{{000000..{summary.shards - 1:06d}}}.tar"
    assert index.samples == corpus.samples
    for entry in index.shards:
        path = tmp_path / entry.name
        data = path.read_bytes()
        assert len(data) <= MAX_SIZE
        assert len(data) == entry.size
        assert hashlib.sha256(data).hexdigest() == entry.sha256
        offsets = decode_offsets((tmp_path / offsets_name(entry.name)).read_bytes(), samples=entry.samples)
        keys_at_offsets = []
        for start in offsets[:-1]:
            header = data[start : start + 512]
            name = header[:100].split(b"\0")[0].decode()
            keys_at_offsets.append(name.split(".")[0])
        assert len(set(keys_at_offsets)) == entry.samples  # each offset starts a new sample
        assert data[offsets[-1] :] == b"\0" * 1024  # the last offset is the end-of-archive marker
    assert verify_dataset(tmp_path / "shardstream-index.json") == []


def test_max_count_caps_samples_per_shard(corpus, tmp_path):
    summary = pack(corpus.files_dir, tmp_path, PackOptions(max_size=None, max_count=5))
    index = DatasetIndex.load(summary.index)
    assert [e.samples for e in index.shards] == [5] * (corpus.samples // 5) + (
        [corpus.samples % 5] if corpus.samples % 5 else []
    )


def test_oversized_sample_gets_its_own_shard_and_a_warning(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.bin").write_bytes(b"a" * 100)
    (src / "b.bin").write_bytes(b"b" * 10_000)
    (src / "c.bin").write_bytes(b"c" * 100)
    with pytest.warns(UserWarning, match="over max_size=4096"):
        summary = pack(src, tmp_path / "out", PackOptions(max_size=4096))
    index = DatasetIndex.load(summary.index)
    assert [e.samples for e in index.shards] == [1, 1, 1]
    assert summary.oversized == 1
    sizes = [e.size for e in index.shards]
    assert sizes[0] <= 4096 and sizes[2] <= 4096 and sizes[1] > 4096


@pytest.mark.parametrize("kind", ["directory", "manifest"])
def test_workers_do_not_change_a_single_byte(corpus, tmp_path, kind):
    source = corpus.files_dir if kind == "directory" else corpus.manifest
    digests = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        pack(source, out, PackOptions(max_size=MAX_SIZE, workers=workers))
        digests.append({p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in shard_paths(out)})
    assert digests[0] == digests[1] and len(digests[0]) > 2


def test_reencoding_is_deterministic_across_workers(corpus, tmp_path):
    media = MediaOptions(image_max_side=32, image_format="jpeg", audio_rate=8000, audio_format="flac")
    digests = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        summary = pack(corpus.manifest, out, PackOptions(max_size=MAX_SIZE, workers=workers, media=media))
        digests.append({p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in shard_paths(out)})
        assert "png" not in summary.fields and "webp" not in summary.fields
        assert "wav" not in summary.fields
    assert digests[0] == digests[1]
