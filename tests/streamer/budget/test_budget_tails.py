"""A budgeted dataset weighs its shards from the index's cost tails: made without reading the sidecars of
shards whose tails hold every cost over the budget, and to the same numbers as reading every column."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from packer import PackOptions, pack
from shardstream.format import DatasetIndex
from shardstream.format.tails import TAIL_SIZE, column_tail, tail_array
from streamer import ShardDataset
from streamer.budget.plan import BudgetOptions, weighed_sums

BUDGET = 800
PER_SHARD = 100
SHARDS = 100
CROWDED = 90  # the one shard with more samples over the budget than its tail holds

_opened: list[str] = []


def _audit(event: str, args: tuple) -> None:
    # Every file this process opens, by the interpreter's own audit event: real opens, nothing mocked.
    if event == "open" and isinstance(args[0], str) and args[0].endswith(".cols"):
        _opened.append(args[0])


sys.addaudithook(_audit)


@pytest.fixture(scope="module")
def costed(tmp_path_factory):
    """100 shards of 100 samples, log-normal costs (median 60, a few over the budget per shard), and
    shard 90 with 20 samples over it: its tail cannot weigh it."""
    root = tmp_path_factory.mktemp("tails")
    rng = np.random.default_rng(7)
    costs = np.minimum(np.exp(rng.normal(np.log(60), 1.1, SHARDS * PER_SHARD)), 3000).astype(int) + 1
    costs[CROWDED * PER_SHARD : CROWDED * PER_SHARD + 20] = 2 * BUDGET
    rows = [{"id": f"s{i:05d}", "num_tokens": int(c)} for i, c in enumerate(costs)]
    (root / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pack(root / "m.jsonl", root / "shards", PackOptions(cost="num_tokens", max_count=PER_SHARD))
    return root / "shards", [costs[i * PER_SHARD : (i + 1) * PER_SHARD] for i in range(SHARDS)]


def _shards_read() -> set[int]:
    return {int(name.rsplit("-", 1)[1].split(".")[0]) for name in _opened}


# "error" refuses an overlong sample the probe reads: over a budget above every cost, it weighs by the sums
@pytest.mark.parametrize(("overlong", "budget"), [("skip", BUDGET), ("truncate", BUDGET), ("error", 4000)])
def test_made_reading_only_the_probe_and_the_shards_whose_tails_fall_short(costed, overlong, budget):
    folder, costs = costed
    _opened.clear()
    ds = ShardDataset(folder, batch_tokens=budget, overlong=overlong)
    probe = set(range(-(-4096 // PER_SHARD)))  # the probe's first shards, in index order
    short = {CROWDED} if overlong != "error" else set()
    print(f"\n{overlong}: {len(_shards_read())} of {SHARDS} sidecars read at construction", end=" ")
    assert _shards_read() == probe | short
    options = BudgetOptions(budget=budget, overlong=overlong)
    counts = np.array([len(c) for c in costs])
    assert ds.budget.sums.tolist() == weighed_sums(counts, costs.__getitem__, options).tolist()


def test_the_index_holds_each_shards_largest_costs(costed):
    folder, costs = costed
    index = DatasetIndex.load(folder / "shardstream-index.json")
    assert index.column_tails == {"cost": [column_tail(c.tolist()) for c in costs]}
    assert all(len(t) == TAIL_SIZE for t in index.column_tails["cost"])


_costs = st.lists(st.lists(st.integers(0, 3000), max_size=3 * TAIL_SIZE), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(_costs, st.integers(1, 3000), st.sampled_from(["skip", "truncate", "error"]), st.data())
def test_weighed_from_tails_equals_weighed_from_columns(shards, budget, overlong, data):
    columns = [np.asarray(c, dtype=np.int64) for c in shards]
    counts = np.array([len(c) for c in columns])
    # some tails cut shorter than TAIL_SIZE (an index that kept fewer): still each shard's largest
    keep = [data.draw(st.integers(0, min(TAIL_SIZE, len(c)))) for c in columns]
    tails = tail_array([column_tail(c.tolist())[:k] for c, k in zip(columns, keep, strict=True)])
    sums = np.array([int(c.sum()) for c in columns])
    options = BudgetOptions(budget=budget, overlong=overlong)
    read: list[int] = []

    def column(shard: int) -> np.ndarray:
        read.append(shard)
        return columns[shard]

    expected = weighed_sums(counts, columns.__getitem__, options)
    got = weighed_sums(counts, column, options, sums=sums, tails=tails)
    assert got.tolist() == expected.tolist()
    for shard in read:  # read only where the tail falls short
        tail = tails[shard][tails[shard] >= 0]
        assert overlong != "error" and len(tail) < counts[shard] and (not len(tail) or tail[-1] > budget)
