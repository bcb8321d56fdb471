"""The index's per-shard cost tails: saved and read back (rows and columns versions), an index without
them still read, and a hostile tail (unsorted, too long, over its sum, misshapen) refused with the fix."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardstream.errors import FormatError
from shardstream.format import DatasetIndex, ShardEntry
from shardstream.format.tails import TAIL_SIZE, check_tail, column_tail, tails_hold


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


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_vectorised_check_agrees_with_the_check_of_each_tail(data):
    """The index loads tails through numpy; any tail the per-shard check refuses, it refuses too."""
    shards = data.draw(st.integers(0, 6))
    rows, sums, counts = [], [], []
    for _ in range(shards):
        costs = data.draw(st.lists(st.integers(0, 50), max_size=12))
        tail = sorted(costs, reverse=True)[:TAIL_SIZE]
        if data.draw(st.booleans()):  # spoil it: unsorted, too long, negative, a bool, or a wrong sum
            spoil = data.draw(st.sampled_from(["flip", "long", "neg", "bool", "sum"]))
            if spoil == "flip" and len(tail) > 1 and tail[0] != tail[-1]:
                tail = tail[::-1]
            elif spoil == "long":
                tail = [*tail, 0] * 2
            elif spoil == "neg" and tail:
                tail[-1] = -1
            elif spoil == "bool" and tail:
                tail[0] = True
            elif spoil == "sum":
                costs = costs[:-1]
        rows.append(tail)
        sums.append(sum(costs))
        counts.append(len(costs))
    try:
        for tail, total, count in zip(rows, sums, counts, strict=True):
            check_tail(tail, total, count, "x")
        each = True
    except FormatError:
        each = False
    assert tails_hold(rows, sums, counts) == each
