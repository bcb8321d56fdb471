"""The index's per-shard cost tails: saved and read back (rows and columns versions), an index without
them still read, and a hostile tail (unsorted, too long, over its sum, misshapen) refused with the fix."""

from __future__ import annotations

import json

import pytest

from shardstream.errors import FormatError
from shardstream.format import DatasetIndex, ShardEntry
from shardstream.format.tails import TAIL_SIZE, column_tail


def _index(costs: list[list[int]]) -> DatasetIndex:
    return DatasetIndex(
        pattern=None,
        shards=[ShardEntry(f"s{i}.tar", len(c), 1024, "") for i, c in enumerate(costs)],
        sample_columns={"cost": "u8"},
        column_sums={"cost": [sum(c) for c in costs]},
        column_tails={"cost": [column_tail(c) for c in costs]},
    )


COSTS = [list(range(20)), [5, 3], [], [7] * 9]


@pytest.mark.parametrize("columns", [False, True])
def test_tails_round_trip_in_both_versions(tmp_path, columns):
    index = _index(COSTS)
    assert index.column_tails["cost"][0] == list(range(19, 19 - TAIL_SIZE, -1))
    assert index.column_tails["cost"][1:3] == [[5, 3], []]
    index.save(tmp_path / "i.json", columns=columns)
    assert DatasetIndex.load(tmp_path / "i.json").column_tails == index.column_tails


def test_an_index_without_tails_reads_as_before():
    index = _index(COSTS)
    index.column_tails = {}
    text = index.to_json()
    assert "column_tails" not in text
    assert DatasetIndex.from_json(text).column_tails == {}


def _with_tails(tails) -> str:
    doc = json.loads(_index(COSTS).to_json())
    doc["column_tails"] = tails
    return json.dumps(doc)


GOOD = [column_tail(c) for c in COSTS]


@pytest.mark.parametrize(
    ("tails", "why"),
    [
        ({"cost": [[12, 19, 18], *GOOD[1:]]}, "not largest first"),
        ({"cost": [list(range(19, 19 - TAIL_SIZE - 1, -1)), *GOOD[1:]]}, "at most min"),
        ({"cost": [GOOD[0], [5, 3, 1], *GOOD[2:]]}, "at most min"),  # longer than the shard
        ({"cost": [GOOD[0], [6, 3], *GOOD[2:]]}, "adds up to 9"),  # the whole shard, not its sum
        ({"cost": [[9000], *GOOD[1:]]}, "adds up to 9000"),
        ({"cost": GOOD[:3]}, "3 tails for 4 shards"),
        ({"cost": [[19, -1], *GOOD[1:]]}, "not a non-negative integer"),
        ({"cost": [[19, True], *GOOD[1:]]}, "not a non-negative integer"),
        ({"cost": [[19, 1.5], *GOOD[1:]]}, "not a non-negative integer"),
        ({"cost": [19, *GOOD[1:]]}, "int values"),
        ({"score": GOOD}, "no column_sums beside it"),
        ([], "must be an object"),
    ],
)
def test_a_hostile_tail_is_refused_naming_the_index_and_the_fix(tails, why):
    with pytest.raises(FormatError, match=why) as caught:
        DatasetIndex.from_json(_with_tails(tails), source="/data/i.json")
    assert "/data/i.json" in str(caught.value) and "rebuild the index" in str(caught.value)
