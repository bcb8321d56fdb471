"""ShardDataset(batch_tokens=...) on a packed set with a cost column: batches within the budget, the same
number on every rank and worker, every sample at most once, resumable, and refusals that say the fix."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from packer import PackOptions, pack
from shardstream.errors import FormatError
from shardstream.format.samplecols import decode_sample_columns, encode_sample_columns
from streamer import ShardDataset

BUDGET = 800
SAMPLES = 1200


@pytest.fixture(scope="module")
def costed(tmp_path_factory):
    """1,200 text records, log-normal costs (median 60, a few over the budget), packed 100 a shard."""
    root = tmp_path_factory.mktemp("costed")
    rng = np.random.default_rng(0)
    costs = np.minimum(np.exp(rng.normal(np.log(60), 1.1, SAMPLES)), 3000).astype(int) + 1
    records = [{"id": f"s{i:05d}", "txt": f"sample {i}", "num_tokens": int(c)} for i, c in enumerate(costs)]
    (root / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    pack(root / "m.jsonl", root / "shards", PackOptions(cost="num_tokens", max_count=100))
    return root / "shards", {r["id"]: r["num_tokens"] for r in records}


def _epoch(ds, workers=0):
    return list(DataLoader(ds, batch_size=None, num_workers=workers))


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("batching", ["pack", "pad"])
def test_batches_fit_the_budget_and_every_rank_yields_as_many(costed, workers, batching):
    shards, cost_of = costed
    per_rank, seen, overlong, left = [], [], 0, 0
    for rank in range(3):
        ds = ShardDataset(shards, batch_tokens=BUDGET, batching=batching, rank=rank, world_size=3, seed=4)
        batches = _epoch(ds, workers)
        per_rank.append(len(batches))
        for batch in batches:
            costs = [s["__cost__"] for s in batch]
            assert costs == [cost_of[s["__key__"]] for s in batch]  # the packed cost, sample by sample
            used = sum(costs) if batching == "pack" else len(costs) * max(costs)
            assert used <= BUDGET
            seen += [s["__key__"] for s in batch]
        overlong += ds.errors["samples_overlong"]
        left += ds.errors["samples_left_out"]
    assert len(set(per_rank)) == 1  # equal steps on every rank
    assert len(seen) == len(set(seen))  # each sample at most once across ranks
    over = sum(1 for c in cost_of.values() if c > BUDGET)
    assert overlong == over and len(seen) + over + left == SAMPLES  # everything accounted for


def test_a_resumed_run_yields_the_batches_the_uninterrupted_run_did(costed):
    shards, _ = costed
    whole = [[s["__key__"] for s in b] for b in _epoch(ShardDataset(shards, batch_tokens=BUDGET, seed=2))]
    ds = ShardDataset(shards, batch_tokens=BUDGET, seed=2)
    it = iter(ds)
    first = [[s["__key__"] for s in next(it)] for _ in range(7)]
    state = ds.state_dict()
    again = ShardDataset(shards, batch_tokens=BUDGET, seed=2)
    again.load_state_dict(state)
    rest = [[s["__key__"] for s in b] for b in again]
    assert first + rest == whole


def test_truncate_marks_overlong_samples_with_the_budget(costed):
    shards, cost_of = costed
    ds = ShardDataset(shards, batch_tokens=BUDGET, overlong="truncate", seed=1)
    cut = [s for b in _epoch(ds) for s in b if cost_of[s["__key__"]] > BUDGET]
    assert cut and all(s["__cost__"] == BUDGET for s in cut)
    assert ds.errors["samples_overlong"] == len(cut)


def test_a_dataset_without_costs_says_how_to_add_them(tmp_path):
    (tmp_path / "m.jsonl").write_text('{"id": "a", "txt": "x"}\n')
    pack(tmp_path / "m.jsonl", tmp_path / "shards", PackOptions())
    with pytest.raises(
        ValueError, match=r"has no cost column: pack with `shardstream pack \.\.\. --cost FIELD`"
    ):
        ShardDataset(tmp_path / "shards", batch_tokens=100)


def test_a_missing_or_stale_cost_sidecar_is_named(costed, tmp_path):
    """Shard 3's .cols deleted, then shard 5's rewritten with one cost changed."""
    shards, _ = costed
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in os.listdir(shards):
        (copy / name).write_bytes((shards / name).read_bytes())
    (copy / "train-000003.tar.cols").unlink()
    with pytest.raises(
        FormatError, match=r"train-000003\.tar\.cols: the per-sample columns of shard 3 are missing"
    ):
        for rank in range(4):  # some rank reads shard 3's column, for a cut or as its own
            _epoch(ShardDataset(copy, batch_tokens=BUDGET, rank=rank, world_size=4))
    (copy / "train-000003.tar.cols").write_bytes((shards / "train-000003.tar.cols").read_bytes())
    cols = copy / "train-000005.tar.cols"
    costs = decode_sample_columns(cols.read_bytes(), source="x", samples=None)["cost"].copy()
    costs[0] += 1  # a column rewritten after the index: still well formed, no longer what the index sums
    cols.write_bytes(encode_sample_columns({"cost": costs}, {"cost": "u8"}))
    with pytest.raises(
        FormatError, match=r"train-000005\.tar\.cols: its costs add up to \d+, the index says"
    ):
        for rank in range(4):
            _epoch(ShardDataset(copy, batch_tokens=BUDGET, rank=rank, world_size=4))


def test_a_state_loads_only_into_the_same_budget(costed):
    shards, _ = costed
    ds = ShardDataset(shards, batch_tokens=BUDGET, seed=2)
    it = iter(ds)
    next(it)
    state = ds.state_dict()
    for other in (
        ShardDataset(shards, batch_tokens=BUDGET + 1, seed=2),
        ShardDataset(shards, batch_tokens=BUDGET, batching="pad", seed=2),
        ShardDataset(shards, seed=2),
    ):
        with pytest.raises(ValueError, match="saved with batch_tokens options"):
            other.load_state_dict(state)
    plain = ShardDataset(shards, seed=2)
    next(iter(plain))
    with pytest.raises(ValueError, match="saved with batch_tokens options None"):
        ShardDataset(shards, batch_tokens=BUDGET, seed=2).load_state_dict(plain.state_dict())
    with pytest.raises(ValueError, match="saved with batch_tokens options"):
        ShardDataset(shards, batch_tokens=BUDGET + 1, seed=2).load_state_dict([state])  # elastic alike


@pytest.mark.parametrize(("old", "new"), [((2, 1), (3, 1)), ((3, 1), (2, 1)), ((1, 1), (4, 1))])
def test_an_elastic_restore_deals_what_is_left_by_cost_equal_steps_nothing_twice(costed, old, new):
    """Each old rank reads a few batches; their states, gathered, continue on another world: the new
    ranks yield equal batches, within the budget, and no sample comes twice in the epoch."""
    shards, cost_of = costed
    (world, _), (again, _) = old, new
    seen, states = [], []
    for rank in range(world):
        ds = ShardDataset(shards, batch_tokens=BUDGET, seed=3, rank=rank, world_size=world, buffer_size=40)
        ds.set_epoch(1)
        it = iter(ds)
        seen += [s["__key__"] for _ in range(4) for s in next(it)]
        states.append(ds.state_dict())
    steps, left = [], 0
    for rank in range(again):
        ds = ShardDataset(shards, batch_tokens=BUDGET, seed=3, rank=rank, world_size=again, buffer_size=40)
        ds.load_state_dict(states)
        batches = list(ds)
        steps.append(len(batches))
        assert all(sum(s["__cost__"] for s in b) <= BUDGET for b in batches)
        seen += [s["__key__"] for b in batches for s in b]
        left += ds.errors["samples_left_out"]
    assert len(set(steps)) == 1  # equal steps on the new world
    assert len(seen) == len(set(seen))  # nothing twice across the checkpoint
    over = sum(1 for c in cost_of.values() if c > BUDGET)
    assert len(seen) + left >= SAMPLES - over - 2 * world  # all kept, or counted (old left-overs aside)


def test_tars_made_elsewhere_indexed_with_cost_into_another_folder_batch_by_budget(tmp_path):
    """webdataset's TarWriter shards, `shardstream index --cost n --out DIR`: the .cols sit in DIR's
    sidecars folder under derived names, and the budget reads them there."""
    from tests.indexer.builders import shardwriter_dataset
    from tests.indexer.test_index_command import index

    samples = shardwriter_dataset(tmp_path / "wds", [15, 9, 21])  # costs n = 0..44
    index(str(tmp_path / "wds"), "--out", str(tmp_path / "idx"), "--cost", "n")
    ds = ShardDataset(tmp_path / "idx", batch_tokens=60, decode=False, seed=0)
    batches = _epoch(ds)
    keys = [s["__key__"] for b in batches for s in b]
    assert all(sum(s["__cost__"] for s in b) <= 60 for b in batches)
    assert len(keys) == len(set(keys)) and len(keys) + ds.errors["samples_left_out"] == 45
    assert {s["__key__"] for b in batches for s in b} <= set(samples)


@pytest.mark.parametrize("workers", [0, 2])
def test_steps_says_how_many_batches_a_rank_yields(costed, workers):
    shards, _ = costed
    ds = ShardDataset(shards, batch_tokens=BUDGET, seed=6, rank=1, world_size=2)
    ds.set_epoch(3)
    assert ds.steps(workers) == len(_epoch(ds, workers))
    with pytest.raises(TypeError, match=r"ds\.steps\(num_workers\)"):
        len(ds)


@pytest.mark.parametrize("bad", [[10**9, 0], [0, 10**9]])
@pytest.mark.parametrize("budgeted", [True, False])
def test_a_saved_id_outside_the_dataset_is_refused_at_load_own_or_elastic(costed, bad, budgeted):
    """A hostile or damaged state naming a sample the dataset does not have, in the batching window or in
    the shuffle buffer: refused when loaded, with the id, not as an IndexError in a worker mid-epoch."""
    shards, _ = costed
    options = {"batch_tokens": BUDGET} if budgeted else {}
    ds = ShardDataset(shards, seed=3, rank=0, world_size=2, buffer_size=40, **options)
    next(iter(ds))
    state = ds.state_dict()
    node = state["node"]
    key = "pool" if budgeted else "buffer"
    while key not in node:
        node = node["source"]
    node[key][0] = [*bad, *node[key][0][2:]]  # buffer ids are pairs; window entries add cost, arrival
    other = ShardDataset(shards, seed=3, rank=1, world_size=2, buffer_size=40, **options).state_dict()
    for loaded, world in ((state, 2), ([state, other], 3)):
        fresh = ShardDataset(shards, seed=3, rank=0, world_size=world, buffer_size=40, **options)
        with pytest.raises(ValueError, match=r"sample \(\d+, \d+\) is not in the dataset"):
            fresh.load_state_dict(loaded)


@pytest.mark.parametrize(
    ("place", "bad", "message"),
    [
        (2, 3.5, "pool cost 3.5: not an int"),
        (2, "x", "pool cost 'x': not an int"),
        (2, BUDGET + 1, "pool cost .*: not an int in"),
        (3, 2**70, "pool arrival .*: not an int in"),
        (3, -1, "pool arrival -1: not an int in"),
        ("arrival", 2**70, "has arrival=.*it must be an int in"),
    ],
)
def test_a_window_entry_the_c_pool_cannot_hold_is_refused_at_load(costed, place, bad, message):
    """A damaged or hostile state's batching window: each entry's cost and arrival are ints in range
    (the C pool keeps them as int64), refused at load naming the key, not as an OverflowError or a
    TypeError that prints a sample when the worker starts."""
    shards, _ = costed
    ds = ShardDataset(shards, seed=3, buffer_size=40, batch_tokens=BUDGET)
    next(iter(ds))
    state = ds.state_dict()
    node = state["node"]
    while "pool" not in node:
        node = node["source"]
    assert node["pool"], "the window holds samples after one batch"
    if place == "arrival":
        node["arrival"] = bad
    else:
        node["pool"][0][place] = bad
    with pytest.raises(ValueError, match=message):
        ShardDataset(shards, seed=3, buffer_size=40, batch_tokens=BUDGET).load_state_dict(state)


def test_pack_collate_gives_cu_seqlens_of_the_costs_through_workers(costed):
    """What varlen attention takes: int32 running costs from 0, and the longest, for every batch."""
    from streamer import pack_collate

    shards, cost_of = costed
    ds = ShardDataset(shards, batch_tokens=BUDGET, seed=1)
    batches = list(DataLoader(ds, batch_size=None, num_workers=2, collate_fn=pack_collate))
    assert len(batches) == ds.steps(2)
    for batch in batches:
        costs = [cost_of[s["__key__"]] for s in batch["samples"]]
        bounds = batch["cu_seqlens"]
        assert bounds.dtype == torch.int32 and bounds.tolist() == [0, *np.cumsum(costs).tolist()]
        assert batch["max_seqlen"] == max(costs) and int(bounds[-1]) <= BUDGET


def test_cu_seqlens_names_a_sample_without_its_cost(costed):
    from streamer import cu_seqlens

    shards, _ = costed
    ds = ShardDataset(shards, batch_tokens=BUDGET, decode=lambda sample: sample["__key__"], seed=1)
    batch = next(iter(ds))
    with pytest.raises(ValueError, match=r"sample 0 of the batch \(str\) has no integer __cost__"):
        cu_seqlens(batch)
    assert cu_seqlens([]).tolist() == [0]


def test_an_epoch_the_probe_under_plans_counts_what_it_leaves_out(tmp_path):
    """The probe reads the first 4,096 samples in index order: here all cost 10 (they pack ~100 a batch),
    and the 1,200 after them cost 510 (one a batch), so the target falls short and the batches leave
    samples out: each one counted, none lost uncounted."""
    costs = [10] * 4096 + [510] * 1200
    records = [{"id": f"u{i:05d}", "txt": "t", "num_tokens": c} for i, c in enumerate(costs)]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    pack(tmp_path / "m.jsonl", tmp_path / "shards", PackOptions(cost="num_tokens", max_count=512))
    ds = ShardDataset(tmp_path / "shards", batch_tokens=1000, seed=0)
    seen = [s["__key__"] for batch in _epoch(ds, 2) for s in batch]
    left = ds.errors["samples_left_out"]
    assert left > 0 and len(seen) == len(set(seen)) and len(seen) + left == len(costs)
