"""The shard list from a source: one brace pattern, a list of patterns end to end, or the packer's index."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamer import ShardDataset
from streamer.placement.shards import ShardList
from tests.conftest import write_dataset


def test_a_list_of_patterns_is_every_pattern_end_to_end_in_order(tmp_path):
    names = ["x/a-0", "x/a-1", "x/a-2", "y/b-08", "y/b-09", "y/b-10", "z/c", "w/p", "w/q"]
    expected = [f"{tmp_path}/{name}.tar" for name in names]
    for path in expected:  # local patterns are checked on disk (their ends) when the list is made
        Path(path).parent.mkdir(exist_ok=True)
        Path(path).touch()
    patterns = ["x/a-{0..2}.tar", "y/b-{08..10}.tar", "z/c.tar", "w/{p,q}.tar"]
    shards = ShardList.from_source([f"{tmp_path}/{pattern}" for pattern in patterns])
    assert len(shards) == len(shards.urls) == 9
    assert [shards.urls[i] for i in range(9)] == expected
    assert shards.urls[-1] == expected[-1] and shards.urls[-9] == expected[0]
    with pytest.raises(IndexError):
        shards.urls[9]
    assert shards.counts is None and shards.total is None
    assert ShardList.from_source([tmp_path / "z/c.tar"]).urls[0] == expected[6]


def test_a_dataset_over_a_list_of_patterns_reads_every_shard_of_every_pattern(tmp_path):
    first = write_dataset(tmp_path / "a", [3, 4], prefix="alpha").parent
    second = write_dataset(tmp_path / "b", [5, 2, 1], prefix="beta").parent
    patterns = [f"{first}/alpha-{{000000..000001}}.tar", f"{second}/beta-{{000000..000002}}.tar"]
    dataset = ShardDataset(patterns, decode=False, shuffle=False)
    seen = [(Path(sample["__url__"]).name, sample["__key__"]) for sample in dataset]
    expected = [
        (f"{prefix}-{n:06d}.tar", f"s{n:03d}-{i:05d}")
        for prefix, counts in (("alpha", [3, 4]), ("beta", [5, 2, 1]))
        for n, c in enumerate(counts)
        for i in range(c)
    ]
    assert seen == expected


def test_no_shards_and_other_sources_are_value_errors():
    with pytest.raises(ValueError, match="no shards"):
        ShardList.from_source([])
    with pytest.raises(ValueError, match="source must be"):
        ShardList.from_source([3])
