"""A packed dataset is looked up by key: the packer writes the key file `shardstream index` would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from packer import PackOptions, pack
from packer.cluster import pack_in_parts
from shardstream.format import INDEX_NAME, DatasetIndex
from shardstream.format.constants import KEYS_NAME
from shardstream.indexer import IndexOptions, index_source
from streamer import ShardMap

KEY_FILES = (KEYS_NAME, KEYS_NAME + ".idx")


def _folder(root: Path, count: int) -> dict[str, dict[str, bytes]]:
    """A folder of samples, two thirds JPEG-named and one third PNG-named, each with its JSON."""
    samples = {}
    for i in range(count):
        key = f"llava-{i:06d}"
        image = ("png" if i % 3 == 2 else "jpg"), bytes([i % 251]) * (100 + i)
        meta = json.dumps({"id": key, "n": i}).encode()
        (root / f"{key}.{image[0]}").write_bytes(image[1])
        (root / f"{key}.json").write_bytes(meta)
        samples[key] = {image[0]: image[1], "json": meta}
    return samples


def _indexed_keys(out: Path, scratch: Path) -> dict[str, bytes]:
    """The key file `shardstream index` writes over the same shards (its own home for the merge)."""
    index = DatasetIndex.load(out / INDEX_NAME)
    pattern = str(out / index.pattern) if index.pattern else None
    assert pattern is not None
    index_source(pattern, IndexOptions(out=scratch))
    return {name: (scratch / name).read_bytes() for name in KEY_FILES}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("llava")
    return root, _folder(root, 40)


def test_a_packed_folder_is_looked_up_by_key(source, tmp_path):
    root, samples = source
    out = tmp_path / "shards" / "llava"
    pack(root, out, PackOptions(max_count=7))
    dataset = ShardMap(out, decode=False)
    for key in ("llava-000000", "llava-000020", "llava-000039"):
        got = dataset.get(key)
        assert got["__key__"] == key and {k: got[k] for k in samples[key]} == samples[key]
    with pytest.raises(KeyError):
        dataset.get("llava-999999")
    index = DatasetIndex.load(out / INDEX_NAME)
    assert index.keys == KEYS_NAME
    # Per-field payload bytes, so `stats` reads them from the index instead of scanning every tar header.
    expected: dict[str, int] = {}
    for members in samples.values():
        for ext, data in members.items():
            expected[ext] = expected.get(ext, 0) + len(data)
    assert index.field_bytes == expected
    # The same bytes `shardstream index` writes over these shards: one format, one merge.
    packed = {name: (out / name).read_bytes() for name in KEY_FILES}
    assert packed == _indexed_keys(out, tmp_path / "by-index")


def test_a_pack_in_parts_writes_the_same_key_file_and_still_audits_duplicates(tmp_path):
    manifest = tmp_path / "records.jsonl"
    ids = [f"r{i:04d}" for i in range(30)] + ["r0003", "r0017"]  # two keys again, in a later part
    manifest.write_text(
        "".join(json.dumps({"id": key, "text": f"caption {n}"}) + "\n" for n, key in enumerate(ids))
    )
    out = tmp_path / "parts"
    summary = pack_in_parts(manifest, out, PackOptions(max_count=4), partition_rows=8)
    assert summary.samples == len(ids)
    assert DatasetIndex.load(out / INDEX_NAME).rejected.get("duplicate-key-across-shards") == 2
    packed = {name: (out / name).read_bytes() for name in KEY_FILES}
    assert packed == _indexed_keys(out, tmp_path / "by-index")
    dataset = ShardMap(out, decode=False)
    assert json.loads(dataset.get("r0029")["json"])["text"] == "caption 29"
    assert json.loads(dataset.get("r0017")["json"])["text"] == "caption 17"  # the first of the two
    assert DatasetIndex.load(out / INDEX_NAME).keys == KEYS_NAME
