"""verify_dataset and `shardstream verify`: the offsets and sample-count checks each find and name damage."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from typer.testing import CliRunner

from packer.sample import Sample
from packer.shardwriter import TarShardWriter, encode_sample
from shardstream.format import (
    INDEX_NAME,
    DatasetIndex,
    ShardEntry,
    decode_offsets,
    encode_offsets,
    shard_pattern,
    verify_dataset,
)
from shardstream.format.verify import check_dataset, decode_check, shard_files
from shardstream_cli import app
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


def _index_tars(shards, out=None, checksum=False):
    """An index made the way `shardstream index` makes it (sidecars apart and absolute names with ``out``)."""
    from shardstream.indexer import IndexOptions, index_source

    summary = index_source(str(shards), IndexOptions(out=out, checksum=checksum))
    return Path(summary.index)


def test_an_index_from_shardstream_index_checks_sidecars_kept_apart(tmp_path):
    write_dataset(tmp_path / "d", [5, 4])
    index_path = _index_tars(tmp_path / "d", out=tmp_path / "idx")
    check = check_dataset(index_path)
    assert check.problems == [] and len(check.shards) == 2 and check.samples == 9
    assert check.notes == ["sha256 not recorded (an index made without --checksum): contents not hashed"]
    index = DatasetIndex.load(index_path)
    assert index.sidecars is not None and index.shards[0].name == "../d/train-000000.tar"  # moves with idx/
    shard, sidecar = shard_files(index_path, index, index.shards[1])
    assert shard.resolve() == (tmp_path / "d" / "train-000001.tar").resolve()
    assert sidecar.parent == tmp_path / "idx" / index.sidecars
    offsets = list(decode_offsets(sidecar.read_bytes(), samples=4))
    sidecar.write_bytes(encode_offsets([*offsets[:-1], offsets[-1] + 512]))  # the end moved: still increasing
    assert verify_dataset(index_path) == [f"{sidecar}: offsets do not point at each sample's first header"]
    sidecar.unlink()
    assert verify_dataset(index_path) == [f"{sidecar}: No such file or directory"]


def test_a_recorded_sha256_is_checked_and_damage_is_named_with_its_offset(tmp_path):
    write_dataset(tmp_path / "d", [3]).unlink()  # the packer's index goes: `index` refuses to replace it
    index_path = _index_tars(tmp_path / "d", checksum=True)  # in place: sidecars beside the shards
    assert check_dataset(index_path).notes == []
    shard = tmp_path / "d" / "train-000000.tar"
    data = bytearray(shard.read_bytes())
    data[600] ^= 0xFF  # member data of the first sample: the tar stays readable
    shard.write_bytes(bytes(data))
    digest = hashlib.sha256(data).hexdigest()
    assert verify_dataset(index_path) == [f"{shard}: sha256 {digest} does not match the index"]
    shard.write_bytes(bytes(data[:1100]))  # cut inside the second member
    problems = verify_dataset(index_path)
    assert problems[0] == f"{shard}: 1100 bytes, index says {len(data)}"
    assert any(p.startswith(f"{shard} at byte ") and "truncated" in p for p in problems)


def test_shards_named_by_url_are_one_problem_not_a_crash(tmp_path):
    names = [f"https://example.invalid/s-{i}.tar" for i in range(3)]
    index = DatasetIndex(None, [ShardEntry(name, 1, 2048, "") for name in names])
    index.save(tmp_path / INDEX_NAME)
    check = check_dataset(tmp_path / INDEX_NAME)
    assert check.shards == [] and len(check.problems) == 1
    assert check.problems[0].startswith("3 shard(s) are URLs (https://example.invalid/s-0.tar, ...)")


def _needs_a_missing_module(data: bytes) -> None:
    import shardstream_no_such_module  # noqa: F401


def test_decode_check_names_each_member_that_fails(tmp_path):
    root = tmp_path / "d"
    root.mkdir()
    writer = TarShardWriter(root / "train-000000.tar", max_size=None, max_count=None)
    for key, text in (("a", b'{"ok": 1}'), ("b", b"{not json"), ("c", b"[]")):
        chunks = encode_sample(Sample(key, key, (("json", text), ("txt", text), ("bin", b"x"))))
        writer.add(key, chunks, sum(len(c) for c in chunks))
    DatasetIndex(shard_pattern("train", 1), [writer.close()]).save(root / INDEX_NAME)
    check = check_dataset(root / INDEX_NAME)
    seen = []
    table = {"json": json.loads, "txt": _needs_a_missing_module}
    decode_check(check, lambda name: table.get(name), progress=seen.append)
    assert seen == [1, 1, 1] and check.decoded == {"json": 2}
    assert check.decode_failures == [
        {
            "shard": str(root / "train-000000.tar"),
            "key": "b",
            "member": "json",
            "reason": check.decode_failures[0]["reason"],
        }
    ]
    assert "Expecting property name" in check.decode_failures[0]["reason"]
    assert check.problems == ["3 txt member(s) not decoded: No module named 'shardstream_no_such_module'"]
