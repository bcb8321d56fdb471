"""Warnings point at the user's line (issue 33, item 8): ``on_error="warn"`` and the stale-index warning
name this file, not a line inside the library's chain of generators, whatever its depth."""

from __future__ import annotations

import warnings

from shardstream.format import decode_offsets
from streamer import ShardDataset
from tests.conftest import write_dataset


def _damaged(tmp_path):
    index = write_dataset(tmp_path / "d", [6, 6])
    shard = index.parent / "train-000001.tar"
    offsets = decode_offsets((index.parent / "train-000001.tar.offsets").read_bytes())
    data = bytearray(shard.read_bytes())
    data[offsets[2] + 5] ^= 0x55  # sample 2's first header: its checksum no longer matches
    shard.write_bytes(bytes(data))
    return index


def _where(dataset) -> set[str]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in dataset:  # the user's line: every warning must point here
            pass
    assert seen
    return {w.filename for w in seen}


def test_a_skipped_sample_is_warned_at_the_users_line(tmp_path):
    index = _damaged(tmp_path)
    for options in ({"shuffle": False}, {"buffer_size": 4}, {"buffer_size": 4, "defer_reads": True}):
        dataset = ShardDataset(index, decode=False, on_error="warn", keep_length=False, **options)
        assert _where(dataset) == {__file__}, options


def test_a_shard_changed_since_indexing_is_warned_at_the_users_line(tmp_path):
    index = write_dataset(tmp_path / "d", [6, 6])
    shard = index.parent / "train-000001.tar"
    shard.write_bytes(shard.read_bytes() + bytes(512))  # another size than the index says
    assert _where(ShardDataset(index, decode=False, seed=1)) == {__file__}
