"""Version-2 indexes: per-shard columns in a binary file beside the JSON, read lazily, checked whole."""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import shardstream.format.index as index_module
from shardstream.errors import FormatError
from shardstream.format import INDEX_NAME, DatasetIndex, ShardColumns, ShardEntry
from shardstream.format.columns import HEADER, columns_name
from shardstream.format.constants import COLUMNS_MAGIC, COLUMNS_NAME
from shardstream.format.verify import check_dataset
from shardstream.indexer import IndexOptions, index_source
from shardstream_cli import app
from streamer import ShardDataset
from streamer.placement.shards import ShardList
from tests.conftest import write_dataset

pytest_plugins = ["tests.servers"]

SHA = {
    "all": lambda i: f"{i * 7919 + 1:064x}",
    "none": lambda i: "",
    "some": lambda i: f"{i:064x}" if i % 3 else "",
}


def entries(n: int, sha: str = "all", prefix: str = "train") -> list[ShardEntry]:
    return [ShardEntry(f"{prefix}-{i:06d}.tar", i % 5, 10240 + 512 * i, SHA[sha](i)) for i in range(n)]


def make_index(n: int, *, sha: str = "all", pattern: bool = True) -> DatasetIndex:
    shards = entries(n, sha)
    return DatasetIndex(
        f"train-{{000000..{n - 1:06d}}}.tar" if pattern else None,
        shards,
        {"jpg": 3 * n},
        {"max_size": 10**6},
        {"missing": 2},
        field_bytes={"jpg": 99},
        sidecars="sc",
        keys="shardstream-keys",
    )


@pytest.mark.parametrize("pattern", [True, False], ids=["pattern", "names"])
@pytest.mark.parametrize("sha", ["all", "none", "some"])
def test_a_version_2_index_reads_back_every_shard_and_all_metadata(tmp_path, pattern, sha):
    saved = make_index(40, sha=sha, pattern=pattern)
    saved.save(tmp_path / INDEX_NAME, columns=True)
    loaded = DatasetIndex.load(tmp_path / INDEX_NAME)
    assert isinstance(loaded.shards, ShardColumns) and loaded.version == 2
    assert loaded.shards == saved.shards and list(loaded.shards) == saved.shards
    assert loaded.shards[-1] == saved.shards[-1] and loaded.shards[3:6] == saved.shards[3:6]
    with pytest.raises(IndexError):
        loaded.shards[40]
    metadata = ("pattern", "fields", "options", "rejected", "field_bytes", "sidecars", "keys")
    assert all(getattr(loaded, name) == getattr(saved, name) for name in metadata)
    assert loaded.samples == saved.samples and loaded.bytes == saved.bytes
    assert loaded.sample_counts() == saved.sample_counts() and loaded.shard_sizes() == saved.shard_sizes()
    assert loaded.checksums == saved.checksums == (sha == "all")
    doc = json.loads((tmp_path / INDEX_NAME).read_text())
    assert "shards" not in doc and doc["totals"] == {
        "shards": 40,
        "samples": saved.samples,
        "bytes": saved.bytes,
    }
    assert doc["columns"]["name"] == COLUMNS_NAME
    # Loaded columns saved again are the same bytes (no re-encoding), and round trip to version 1 too.
    before = (tmp_path / COLUMNS_NAME).read_bytes()
    loaded.save(tmp_path / INDEX_NAME, columns=True)
    assert (tmp_path / COLUMNS_NAME).read_bytes() == before
    loaded.save(tmp_path / "v1.json", columns=False)
    assert DatasetIndex.load(tmp_path / "v1.json").shards == saved.shards


def test_the_columns_file_layout_is_the_documented_one(tmp_path):
    make_index(3, pattern=False).save(tmp_path / INDEX_NAME, columns=True)
    data = (tmp_path / COLUMNS_NAME).read_bytes()
    magic, layout, flags, n, blob = HEADER.unpack_from(data)
    names = b"".join(f"train-{i:06d}.tar".encode() for i in range(3))
    assert (magic, layout, flags, n, blob) == (COLUMNS_MAGIC, 1, 1 | 2 | 4, 3, len(names))
    body = memoryview(data)[HEADER.size :]
    assert struct.unpack_from("<3q3q", body) == (0, 1, 2, 10240, 10752, 11264)
    assert bytes(body[48 : 48 + 32]).hex() == f"{1:064x}" and bytes(body[80:112]).hex() == f"{7920:064x}"
    assert struct.unpack_from("<4Q", body, 48 + 96) == (0, 16, 32, 48) and data.endswith(names)


def test_small_indexes_stay_version_1_rows_and_the_threshold_switches(tmp_path, monkeypatch):
    small = make_index(4)
    small.save(tmp_path / INDEX_NAME)
    assert (tmp_path / INDEX_NAME).read_text() == small.to_json() and not (tmp_path / COLUMNS_NAME).exists()
    assert '"version": 1' in small.to_json() and '["train-000003.tar",3,11776,' in small.to_json()
    assert isinstance(DatasetIndex.load(tmp_path / INDEX_NAME).shards, list)
    monkeypatch.setattr(index_module, "COLUMNS_THRESHOLD", 3)
    small.save(tmp_path / INDEX_NAME)  # 4 > 3 shards: columns
    assert (
        json.loads((tmp_path / INDEX_NAME).read_text())["version"] == 2 and (tmp_path / COLUMNS_NAME).exists()
    )
    make_index(3).save(tmp_path / INDEX_NAME)  # back under: rows again, and the stale columns file goes
    assert json.loads((tmp_path / INDEX_NAME).read_text())["version"] == 1
    assert not (tmp_path / COLUMNS_NAME).exists()
    assert columns_name("i.json") == "i.columns" and columns_name("index") == "index.columns"


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "missing":
        path.unlink()
    elif how == "truncated":
        path.write_bytes(data[:-8])
    elif how == "flipped":
        data[HEADER.size + 3] ^= 0x40
        path.write_bytes(data)
    elif how == "replaced":  # another index's columns file of the very same size
        other = path.parent / "other"
        other.mkdir()
        shards = [ShardEntry(e.name, e.samples + 1, e.size, e.sha256) for e in entries(40)]
        DatasetIndex("train-{000000..000039}.tar", shards).save(other / INDEX_NAME, columns=True)
        shutil.copy(other / COLUMNS_NAME, path)


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("missing", "missing"),
        ("truncated", "bytes, the index"),
        ("flipped", "sha256 differs"),
        ("replaced", "sha256 differs"),
    ],
)
def test_a_damaged_columns_file_is_a_format_error_naming_it_and_the_fix(tmp_path, how, says):
    make_index(40).save(tmp_path / INDEX_NAME, columns=True)
    _damage(tmp_path / COLUMNS_NAME, how)
    with pytest.raises(FormatError) as caught:
        DatasetIndex.load(tmp_path / INDEX_NAME)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / COLUMNS_NAME}: ") and says in message
    assert "rebuild the index" in message
    with pytest.raises(FormatError, match=says):
        ShardList.from_source(tmp_path)


def _rewrite(folder: Path, original: str, data: bytes, **doc_changes: object) -> None:
    """A columns file whose recorded size and sha256 match (so the checks below those are what fires)."""
    (folder / COLUMNS_NAME).write_bytes(data)
    doc = json.loads(original)
    doc["columns"].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    doc.update(doc_changes)
    (folder / INDEX_NAME).write_text(json.dumps(doc))


def test_a_columns_file_that_disagrees_with_itself_or_the_index_is_refused(tmp_path):
    make_index(10).save(tmp_path / INDEX_NAME, columns=True)
    good, original = (tmp_path / COLUMNS_NAME).read_bytes(), (tmp_path / INDEX_NAME).read_text()
    cases = [
        (b"NOTCOLS!" + good[8:], {}, "not a shardstream columns file"),
        (good[:8] + struct.pack("<I", 9) + good[12:], {}, "columns layout 9"),
        (good[:-32], {}, "header describes"),
        (good[:4], {}, "shorter than the 32-byte header"),
        (good, {"pattern": "train-{000000..000010}.tar"}, "names 11"),
        (good, {"pattern": None}, "lacks shard names"),
        (good, {"totals": {"shards": 11}}, "10 shards, the index .* says 11"),
    ]
    for data, changes, says in cases:
        _rewrite(tmp_path, original, data, **changes)
        with pytest.raises(FormatError, match=says) as caught:
            DatasetIndex.load(tmp_path / INDEX_NAME)
        assert str(tmp_path / COLUMNS_NAME) in str(caught.value)
    for name in ("../x.columns", "/abs.columns", ""):
        _rewrite(tmp_path, original, good, columns={"name": name, "bytes": len(good), "sha256": "0" * 64})
        with pytest.raises(FormatError, match="plain name relative"):
            DatasetIndex.load(tmp_path / INDEX_NAME)
    text = (tmp_path / INDEX_NAME).read_text()
    with pytest.raises(FormatError, match="version-2 index keeps its shards"):
        DatasetIndex.from_json(text.replace('"name": ""', f'"name": "{COLUMNS_NAME}"'))


def test_shards_the_columns_cannot_hold_are_refused_when_saving(tmp_path):
    with pytest.raises(ValueError, match="not 64 hex digits"):
        DatasetIndex(None, [*entries(2), ShardEntry("x.tar", 1, 2, "abc")]).save(
            tmp_path / "i.json", columns=True
        )
    misnamed = entries(5000)
    misnamed[2500] = ShardEntry("elsewhere.tar", 1, 2, "")
    for shards in (misnamed, entries(5000)[:-1]):
        with pytest.raises(ValueError, match="pattern"):
            DatasetIndex("train-{000000..004999}.tar", shards).save(tmp_path / "i.json", columns=True)
    assert not (tmp_path / "i.json").exists()


@pytest.mark.parametrize("pattern", [True, False], ids=["pattern", "names"])
def test_the_streamer_reads_a_version_2_index_as_it_reads_version_1(tmp_path, pattern):
    path = write_dataset(tmp_path / "d", [3, 5, 2, 4])
    rows = DatasetIndex.load(path)
    rows_list = ShardList.from_source(path)
    expected = [(s["__key__"], s["txt"]) for s in ShardDataset(path, decode=False, shuffle=False)]
    DatasetIndex(rows.pattern if pattern else None, rows.shards).save(path, columns=True)
    shards = ShardList.from_source(tmp_path / "d")
    assert isinstance(DatasetIndex.load(path).shards, ShardColumns)
    assert list(shards.urls) == list(rows_list.urls) and shards.counts.dtype == np.int64
    assert shards.counts.tolist() == [3, 5, 2, 4] and shards.total == 14
    digests = [hashlib.sha256(Path(url).read_bytes()).hexdigest() for url in shards.urls]
    assert [shards.sha256(i) for i in range(4)] == digests == [e.sha256 for e in rows.shards]
    copy = pickle.loads(pickle.dumps(shards))  # what a spawned DataLoader worker gets
    assert list(copy.urls) == list(shards.urls) and copy.counts.tolist() == shards.counts.tolist()
    dataset = ShardDataset(path, decode=False, shuffle=False)
    assert len(dataset) == 14
    assert [(s["__key__"], s["txt"]) for s in dataset] == expected
    assert check_dataset(path).problems == []
    info = CliRunner().invoke(app, ["info", str(path.parent), "--json"])
    assert info.exit_code == 0 and json.loads(info.stdout)["shards"] == 4


def test_an_index_over_http_reads_its_columns_file_beside_it(tmp_path, fault_server, monkeypatch):
    path = write_dataset(fault_server.root / "d", [2, 3])
    DatasetIndex.load(path).save(path, columns=True)
    shards = ShardList.from_source(f"{fault_server.url}/d/{INDEX_NAME}")
    assert shards.counts.tolist() == [2, 3] and shards.urls[1] == f"{fault_server.url}/d/train-000001.tar"
    (fault_server.root / "d" / COLUMNS_NAME).unlink()
    # Another node (a fresh metadata cache): this one keeps the columns file it read, as the same index's.
    monkeypatch.setenv("SHARDSTREAM_CACHE", str(tmp_path / "another-node"))
    with pytest.raises(FormatError, match=f"{fault_server.url}/d/{COLUMNS_NAME}: missing"):
        ShardList.from_source(f"{fault_server.url}/d/{INDEX_NAME}")


def test_shardstream_index_writes_columns_past_the_threshold(tmp_path, monkeypatch):
    data = write_dataset(tmp_path / "d", [2, 3, 1]).parent
    by_rows = index_source(str(data), IndexOptions(out=tmp_path / "rows", checksum=True))
    monkeypatch.setattr(index_module, "COLUMNS_THRESHOLD", 2)
    by_columns = index_source(str(data), IndexOptions(out=tmp_path / "cols", checksum=True))
    rows, columns = DatasetIndex.load(by_rows.index), DatasetIndex.load(by_columns.index)
    assert rows.version == 1 and columns.version == 2 and (tmp_path / "cols" / COLUMNS_NAME).exists()
    assert columns.shards == rows.shards and columns.checksums and columns.field_bytes == rows.field_bytes
    assert check_dataset(Path(by_columns.index)).problems == []
    stats = CliRunner().invoke(app, ["stats", str(tmp_path / "cols"), "--json"])
    assert stats.exit_code == 0 and json.loads(stats.stdout)["samples_per_shard"]["max"] == 3
    # A rerun recognizes its own index, the columns file gone or not.
    (tmp_path / "cols" / COLUMNS_NAME).unlink()
    index_source(str(data), IndexOptions(out=tmp_path / "cols", checksum=True))
    assert DatasetIndex.load(by_columns.index).shards == rows.shards
