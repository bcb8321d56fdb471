"""verify_dataset and `shardstream verify`: the offsets and sample-count checks each find and name damage."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from packer.sample import Sample
from packer.shardwriter import TarShardWriter, encode_sample
from shardstream.cli import app
from shardstream.format import (
    INDEX_NAME,
    DatasetIndex,
    ShardEntry,
    decode_offsets,
    encode_offsets,
    shard_pattern,
    verify_dataset,
)
from tests.conftest import write_dataset

runner = CliRunner()


def _rewrite_index(index_path, shard: int, **changes) -> None:
    index = DatasetIndex.load(index_path)
    old = index.shards[shard]
    index.shards[shard] = ShardEntry(
        changes.get("name", old.name),
        changes.get("samples", old.samples),
        changes.get("size", old.size),
        changes.get("sha256", old.sha256),
    )
    index.save(index_path)


def test_intact_dataset_has_no_problems(tmp_path):
    assert verify_dataset(write_dataset(tmp_path / "d", [5, 4, 6])) == []


def test_offsets_that_miss_a_sample_start_are_named(tmp_path):
    index_path = write_dataset(tmp_path / "d", [5, 4])
    sidecar = tmp_path / "d" / "train-000000.tar.offsets"
    offsets = list(decode_offsets(sidecar.read_bytes(), samples=5))
    offsets[2] += 512  # still increasing and still 5 + 1 numbers: only the sample starts are wrong
    sidecar.write_bytes(encode_offsets(offsets))
    assert verify_dataset(index_path) == [f"{sidecar}: offsets do not point at each sample's first header"]
    result = runner.invoke(app, ["verify", str(tmp_path / "d"), "--json"])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["ok"] is False
    assert doc["problems"] == [f"{sidecar}: offsets do not point at each sample's first header"]


def test_a_sidecar_off_by_one_whole_sample_is_named(tmp_path):
    index_path = write_dataset(tmp_path / "d", [5])
    sidecar = tmp_path / "d" / "train-000000.tar.offsets"
    offsets = list(decode_offsets(sidecar.read_bytes(), samples=5))
    sidecar.write_bytes(encode_offsets([0, *offsets[2:], offsets[-1] + 1024]))  # skips sample 1's start
    assert verify_dataset(index_path) == [f"{sidecar}: offsets do not point at each sample's first header"]


def test_an_index_count_that_differs_from_the_shard_is_named(tmp_path):
    index_path = write_dataset(tmp_path / "d", [5, 4])
    shard = tmp_path / "d" / "train-000001.tar"
    _rewrite_index(index_path, 1, samples=5)  # the bytes, and so size and sha256, are unchanged
    problems = verify_dataset(index_path)
    assert f"{shard}: 4 samples, index says 5" in problems
    result = runner.invoke(app, ["verify", str(index_path), "--json"])
    assert result.exit_code == 1
    assert f"{shard}: 4 samples, index says 5" in json.loads(result.stdout)["problems"]


def test_count_is_checked_even_where_the_sidecar_is_missing(tmp_path):
    index_path = write_dataset(tmp_path / "d", [5, 4])
    shard, sidecar = tmp_path / "d" / "train-000000.tar", tmp_path / "d" / "train-000000.tar.offsets"
    sidecar.unlink()
    _rewrite_index(index_path, 0, samples=6)
    problems = verify_dataset(index_path)
    assert problems[0] == f"{shard}: 5 samples, index says 6"
    assert len(problems) == 2 and problems[1].startswith(f"{sidecar}: ")


def test_a_consistent_shard_whose_samples_merge_on_reading_is_caught(tmp_path):
    """Size, sha256 and sidecar all agree with the index, but two adjacent members share a key."""
    root = tmp_path / "d"
    root.mkdir()
    writer = TarShardWriter(root / "train-000000.tar", max_size=None, max_count=None)
    for key, ext in (("a", "txt"), ("a", "cls"), ("b", "txt")):  # writer counts 3; readers see a and b
        chunks = encode_sample(Sample(key, key, ((ext, f"{key}-{ext}".encode()),)))
        writer.add(key, chunks, sum(len(c) for c in chunks))
    entry = writer.close()
    assert entry.samples == 3
    DatasetIndex(shard_pattern("train", 1), [entry]).save(root / INDEX_NAME)
    problems = verify_dataset(root / INDEX_NAME)
    shard = root / "train-000000.tar"
    assert f"{shard}: 2 samples, index says 3" in problems
    assert f"{shard}.offsets: offsets do not point at each sample's first header" in problems
    assert not any("sha256" in p for p in problems)
