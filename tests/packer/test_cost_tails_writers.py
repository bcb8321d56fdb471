"""Every writer of the index's cost sums writes each shard's tail too, equal to its .cols' largest costs:
pack (local, in parts, resumed after kill -9), ``shardstream index --cost`` and ``shardstream columns``."""

from __future__ import annotations

import json
from pathlib import Path

from packer import PackOptions, pack
from packer.cluster import pack_in_parts
from shardstream.format import INDEX_NAME, DatasetIndex, decode_sample_columns
from shardstream.format.sidecars import sample_columns_sidecar
from shardstream.format.tails import column_tail
from tests.cli.test_columns_command import FNS, run, tiny_dataset
from tests.indexer.builders import shardwriter_dataset
from tests.indexer.test_index_command import index
from tests.packer.killing import pack_killed

COST = PackOptions(max_count=23, max_size=None, cost="num_tokens")


def _manifest(folder: Path, count: int = 150) -> Path:
    # costs out of order, so that a tail is more than a shard's last few
    rows = [{"id": f"s{i:03d}", "num_tokens": (i * 37) % 101 + 1} for i in range(count)]
    path = folder / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _check_tails(folder: Path, name: str = "cost") -> DatasetIndex:
    """The index's tails are each shard's .cols' largest values, largest first."""
    loaded = DatasetIndex.load(folder / INDEX_NAME)
    assert len(loaded.column_tails[name]) == len(loaded.shards)
    for shard, entry in enumerate(loaded.shards):
        cols = folder / (
            f"{entry.name}.cols"
            if loaded.sidecars is None
            else f"{loaded.sidecars}/{sample_columns_sidecar(entry.name)}"
        )
        values = decode_sample_columns(cols.read_bytes(), source=str(cols), samples=entry.samples)[name]
        assert loaded.column_tails[name][shard] == column_tail(values.tolist())
    return loaded


def test_pack_local_resumed_and_in_parts_write_the_same_tails(tmp_path):
    manifest = _manifest(tmp_path)
    pack(manifest, tmp_path / "whole", COST)
    whole = _check_tails(tmp_path / "whole")
    assert len(whole.shards) == 7 and all(len(t) == 8 for t in whole.column_tails["cost"][:6])
    options = {"max_count": 23, "max_size": None, "cost": "num_tokens"}  # as COST
    pack_killed(manifest, tmp_path / "cut", options, shards=3, samples=1)
    pack(manifest, tmp_path / "cut", PackOptions(**{**COST.__dict__, "resume": True}))
    reference = (tmp_path / "whole" / INDEX_NAME).read_bytes()
    assert (tmp_path / "cut" / INDEX_NAME).read_bytes() == reference  # the tails journaled, not lost
    pack_in_parts(manifest, tmp_path / "parts", COST, partition_rows=40)
    _check_tails(tmp_path / "parts")  # shards end at each part's end: other shards, their own tails
    pack_in_parts(
        manifest, tmp_path / "again", PackOptions(**{**COST.__dict__, "workers": 2}), partition_rows=40
    )
    assert (tmp_path / "again" / INDEX_NAME).read_bytes() == (tmp_path / "parts" / INDEX_NAME).read_bytes()


def test_index_cost_writes_each_shards_tail(tmp_path):
    data = tmp_path / "wds"
    shardwriter_dataset(data, [15, 3, 21])
    index(str(data), "--cost", "n")
    assert [len(t) for t in _check_tails(data).column_tails["cost"]] == [8, 3, 8]
    index(str(data), "--out", str(tmp_path / "out"), "--cost", "n")
    _check_tails(tmp_path / "out")


def test_columns_writes_tails_of_its_non_negative_columns(tmp_path):
    root = tmp_path / "d"
    tiny_dataset(root, 3, 50)
    run("columns", str(root), "--fn", f"{FNS}:text_length")
    _check_tails(root)
    run("columns", str(root), "--fn", f"{FNS}:two_columns")  # "score" goes below zero in shard 0
    again = _check_tails(root, "length")
    assert set(again.column_tails) == {"cost", "length"}
