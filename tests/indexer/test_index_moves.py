"""`index SRC --out DIR` names the shards relative to DIR, so the two folders can move together."""

from __future__ import annotations

import json
import shutil

from shardstream.format import INDEX_NAME
from shardstream.indexer import IndexOptions, index_source
from streamer import ShardMap
from tests.indexer.builders import shardwriter_dataset


def test_an_index_beside_its_shards_moves_with_them(tmp_path):
    before = tmp_path / "before"
    samples = shardwriter_dataset(before / "wds", [5, 3, 6])
    index_source(str(before / "wds"), IndexOptions(out=before / "index"))
    rows = json.loads((before / "index" / INDEX_NAME).read_text())["shards"]
    assert [row[0] for row in rows] == [f"../wds/w-{i:06d}.tar" for i in range(3)]
    after = tmp_path / "after"
    shutil.move(before, after)
    dataset = ShardMap(after / "index", decode=False)
    key = sorted(samples)[-1]
    got = dataset.get(key)
    assert got["__key__"] == key and got["jpg"] == samples[key]["jpg"]
    assert [dataset[i]["__key__"] for i in range(len(dataset))] == list(samples)
