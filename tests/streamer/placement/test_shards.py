"""The shard list from a source: one brace pattern, a list of patterns end to end, or the packer's index."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamer import ShardDataset
from streamer.placement.shards import ShardList
from tests.conftest import write_dataset


def test_a_list_of_patterns_is_every_pattern_end_to_end_in_order():
    shards = ShardList.from_source(["/x/a-{0..2}.tar", "/y/b-{08..10}.tar", "/z/c.tar", "/w/{p,q}.tar"])
    expected = [
        "/x/a-0.tar",
        "/x/a-1.tar",
        "/x/a-2.tar",
        "/y/b-08.tar",
        "/y/b-09.tar",
        "/y/b-10.tar",
        "/z/c.tar",
        "/w/p.tar",
        "/w/q.tar",
    ]
    assert len(shards) == len(shards.urls) == 9
    assert [shards.urls[i] for i in range(9)] == expected
    assert shards.urls[-1] == "/w/q.tar" and shards.urls[-9] == "/x/a-0.tar"
    with pytest.raises(IndexError):
        shards.urls[9]
    assert shards.counts is None and shards.total is None
    assert ShardList.from_source([Path("/z/c.tar")]).urls[0] == "/z/c.tar"


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
