"""Subsets in the plan (issue 37): a subset index or include/exclude/where deals only the kept samples,
equally over ranks and workers, never reads a left-out one, and resumes exactly."""

from __future__ import annotations

import json
import pickle
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from packer import PackOptions, pack
from shardstream.errors import FormatError, ShardReadError
from shardstream.format.subsetindex import write_subset
from shardstream.io.iostats import IO
from shardstream.subset import SubsetOptions, make_subset
from streamer import ShardDataset, StatefulLoader

pytest_plugins = ["tests.servers"]

SAMPLES = 240
BIG = 1 << 20  # a left-out sample's text in the never-read test: more than every kept byte together


def _keys(i: int) -> str:
    return f"k{i:04d}"


def _pack(root, big=()):
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "m.jsonl", "w") as handle:
        for i in range(SAMPLES):
            text = "y" * BIG if i in big else "x" * (1 + i % 40)
            handle.write(json.dumps({"id": _keys(i), "txt": text, "num_tokens": i % 97}) + "\n")
    pack(root / "m.jsonl", root / "d", PackOptions(cost="num_tokens", max_count=35), progress=False)
    return root / "d"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return _pack(tmp_path_factory.mktemp("subsets"))


def _read(ds, workers=0):
    return [s["__key__"] for s in DataLoader(ds, batch_size=None, num_workers=workers)]


def test_a_subset_index_is_read_over_ranks_and_workers_each_kept_sample_once(dataset, tmp_path):
    (tmp_path / "out.txt").write_text("".join(f"{_keys(i)}\n" for i in range(0, SAMPLES, 3)))
    make_subset(dataset, tmp_path / "sub", SubsetOptions(exclude=tmp_path / "out.txt", where="cost >= 10"))
    kept = {_keys(i) for i in range(SAMPLES) if i % 3 and i % 97 >= 10}
    seen: list[str] = []
    per_rank = []
    for rank in range(2):
        ds = ShardDataset(tmp_path / "sub", rank=rank, world_size=2, decode=False, buffer_size=16, seed=3)
        keys = _read(ds, workers=2)
        per_rank.append(len(keys))
        assert len(keys) == len(ds)
        seen += keys
    assert per_rank[0] == per_rank[1] == len(kept) // 2
    assert len(seen) == len(set(seen)) and set(seen) <= kept
    assert len(kept - set(seen)) == len(kept) % 2  # the remainder "drop" leaves out, no more


def test_include_exclude_and_where_given_to_the_dataset_choose_the_same_samples(dataset, tmp_path):
    (tmp_path / "in.txt").write_text("".join(f"{_keys(i)}\n" for i in range(100)))
    chosen = {"include": tmp_path / "in.txt", "exclude": {_keys(5), "absent"}, "where": "cost % 2 == 0"}
    ds = ShardDataset(dataset, decode=False, **chosen)
    want = {_keys(i) for i in range(100) if i != 5 and (i % 97) % 2 == 0}
    keys = _read(ds)
    assert sorted(keys) == sorted(want) and len(ds) == len(want)


def test_a_left_out_samples_bytes_are_never_read(tmp_path):
    big = {3, 50, 51, 100, 200}  # in four shards, one in a pair, none a shard's first
    root = _pack(tmp_path, big=big)
    ds = ShardDataset(root, exclude={_keys(i) for i in big}, decode=False, shuffle=False, prefetch=2)
    before = IO.values()
    keys = _read(ds)
    read = IO.since(before)["bytes"]
    assert sorted(keys) == sorted(_keys(i) for i in range(SAMPLES) if i not in big)
    kept_bytes = sum((1 + i % 40) + 3 * 1024 for i in range(SAMPLES) if i not in big)  # text + headers
    assert 0 < read < kept_bytes < BIG  # one left-out sample read would pass it


def test_resuming_a_subset_equals_the_uninterrupted_run(dataset):
    def loader():
        ds = ShardDataset(dataset, where="cost > 20", decode=False, buffer_size=20, seed=7)
        return StatefulLoader(ds, batch_size=None, num_workers=2)

    whole = [s["__key__"] for s in loader()]
    first = loader()
    head, it = [], iter(first)
    for _ in range(37):
        head.append(next(it)["__key__"])
    state = pickle.loads(pickle.dumps(first.state_dict()))
    del it
    second = loader()
    second.load_state_dict(state)
    assert head + [s["__key__"] for s in second] == whole
    assert len(whole) == len(set(whole)) == sum(1 for i in range(SAMPLES) if i % 97 > 20)


def test_a_dataset_packed_again_refuses_its_old_subset(tmp_path):
    root = _pack(tmp_path / "a")
    make_subset(root, tmp_path / "sub", SubsetOptions(where="cost < 5"))
    shutil.rmtree(root)
    with open(tmp_path / "a" / "m.jsonl", "a") as handle:
        handle.write(json.dumps({"id": "k9999", "txt": "z", "num_tokens": 1}) + "\n")
    pack(tmp_path / "a" / "m.jsonl", root, PackOptions(cost="num_tokens", max_count=35), progress=False)
    with pytest.raises(FormatError, match=r"changed since the subset was made.*shardstream subset"):
        ShardDataset(tmp_path / "sub")


def test_a_damaged_masks_file_is_refused_naming_it(dataset, tmp_path):
    make_subset(dataset, tmp_path / "sub", SubsetOptions(where="cost < 5"))
    masks = tmp_path / "sub" / "shardstream-subset.masks"
    data = bytearray(masks.read_bytes())
    data[-1] ^= 0xFF
    masks.write_bytes(bytes(data))
    with pytest.raises(FormatError, match=r"shardstream-subset\.masks.*not the masks"):
        ShardDataset(tmp_path / "sub")


def test_a_second_selection_on_a_subset_is_refused_naming_why(dataset, tmp_path):
    make_subset(dataset, tmp_path / "sub", SubsetOptions(where="cost < 50"))
    with pytest.raises(ValueError, match="already a subset"):
        ShardDataset(tmp_path / "sub", where="cost < 10")


def test_token_budgets_on_a_subset_pack_its_kept_samples_with_equal_steps(dataset, tmp_path):
    make_subset(dataset, tmp_path / "sub", SubsetOptions(exclude={_keys(i) for i in range(0, SAMPLES, 5)}))
    kept = {_keys(i) for i in range(SAMPLES) if i % 5}
    steps, seen = set(), []
    for rank in range(2):
        ds = ShardDataset(tmp_path / "sub", rank=rank, world_size=2, decode=False, batch_tokens=256)
        batches = list(DataLoader(ds, batch_size=None, num_workers=2))
        steps.add((len(batches), ds.steps(2)))
        for batch in batches:
            assert sum(s["__cost__"] for s in batch) <= 256
            seen += [s["__key__"] for s in batch]
    assert len(steps) == 1 and {a for a, b in steps} == {b for a, b in steps}
    assert len(seen) == len(set(seen)) and set(seen) <= kept
    assert len(seen) > 0.9 * len(kept)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    keep=st.lists(st.booleans(), min_size=SAMPLES, max_size=SAMPLES),
    world=st.integers(1, 4),
    buffer=st.sampled_from([1, 7, 100]),
    defer=st.booleans(),
)
def test_random_masks_give_equal_counts_per_rank_and_no_left_out_sample(
    dataset, tmp_path_factory, keep, world, buffer, defer
):
    index = dataset / "shardstream-index.json"
    counts = [35] * (SAMPLES // 35) + ([SAMPLES % 35] if SAMPLES % 35 else [])
    bits = np.array(keep)
    ends = np.cumsum(counts)
    masks = [bits[end - count : end] for count, end in zip(counts, ends, strict=True)]
    out = tmp_path_factory.mktemp("random")
    counts_array, index_bytes = np.array(counts), index.read_bytes()
    write_subset(out, dataset=str(index), index_bytes=index_bytes, counts=counts_array, masks=masks)
    kept = {_keys(i) for i in range(SAMPLES) if keep[i]}
    seen: list[str] = []
    sizes = set()
    for rank in range(world):
        ds = ShardDataset(
            out, rank=rank, world_size=world, decode=False, buffer_size=buffer, defer_reads=defer
        )
        keys = _read(ds)
        sizes.add(len(keys))
        seen += keys
    assert sizes == {len(kept) // world}
    assert len(seen) == len(set(seen)) and set(seen) <= kept


def test_a_damaged_kept_sample_is_skipped_and_counted_in_the_subsets_numbers(tmp_path):
    from shardstream.format import decode_offsets

    root = _pack(tmp_path)
    shard = root / "train-000001.tar"  # samples 35..69; the subset keeps every third
    offsets = decode_offsets((root / "train-000001.tar.offsets").read_bytes())
    data = bytearray(shard.read_bytes())
    data[offsets[12] + 148] ^= 0x01  # sample 47's first header checksum: kept (47 % 3 == 2), 8th kept here
    shard.write_bytes(bytes(data))
    ds = ShardDataset(
        root, where="cost % 3 == 2", decode=False, shuffle=False, on_error="skip", keep_length=False
    )
    keys = _read(ds)
    kept = [_keys(i) for i in range(SAMPLES) if i % 97 % 3 == 2]
    assert keys == [k for k in kept if k != _keys(47)]
    assert ds.errors["samples_skipped"] == 1
    strict = ShardDataset(root, where="cost % 3 == 2", decode=False, shuffle=False)
    with pytest.raises(ShardReadError) as caught:
        _read(strict)
    assert caught.value.offset == offsets[12]  # the shard's own byte, not one of the kept bytes' stream


def test_a_mixture_source_and_a_shardmap_read_a_subset_as_its_kept_samples(dataset, tmp_path):
    from streamer import Mixture, ShardMap

    make_subset(dataset, tmp_path / "sub", SubsetOptions(where="cost < 30"))
    kept = [_keys(i) for i in range(SAMPLES) if i % 97 < 30]
    mapped = ShardMap(str(tmp_path / "sub"), decode=False)
    assert len(mapped) == len(kept)
    assert sorted(mapped[i]["__key__"] for i in range(len(mapped))) == kept
    sources = [
        {"path": str(tmp_path / "sub"), "name": "sub", "weight": 1, "decode": False},
        {"path": str(dataset), "name": "all", "weight": 1, "decode": False},
    ]
    samples = list(Mixture(sources, epoch_size=2 * len(kept)))
    first = [s["__key__"] for s in samples if s["__source__"] == "sub"]
    assert sorted(first) == kept  # one pass over the subset's kept samples, nothing it leaves out


def test_a_subsets_checkpoint_continues_on_another_topology_each_kept_sample_once(dataset, tmp_path):
    from torchdata.stateful_dataloader import StatefulDataLoader

    make_subset(dataset, tmp_path / "sub", SubsetOptions(where="cost % 4 != 1"))
    kept = {_keys(i) for i in range(SAMPLES) if i % 97 % 4 != 1}

    def run(world, workers, states=None, stop=None):
        keys, saved = [], []
        for rank in range(world):
            ds = ShardDataset(tmp_path / "sub", rank=rank, world_size=world, decode=False, buffer_size=16)
            if states is not None:
                ds.load_state_dict(pickle.loads(pickle.dumps(states)))
            loader = StatefulDataLoader(ds, batch_size=4, num_workers=workers, collate_fn=list)
            got = []
            for n, batch in enumerate(loader):
                got.append([s["__key__"] for s in batch])
                if n + 1 == stop:
                    saved.append(loader.state_dict())
                    break
            keys.append([k for batch in got for k in batch])
        return keys, saved

    before, states = run(2, 2, stop=9)
    after, _ = run(3, 1, states=states)
    assert len({len(rank) for rank in after}) == 1  # equal on every new rank
    seen = [k for rank in before + after for k in rank]
    assert len(seen) == len(set(seen)) and set(seen) <= kept
    assert len(kept) - len(seen) < 2 + 3  # what "drop" leaves of each topology's deal


@pytest.mark.slow
def test_a_real_run_of_100000_samples_reads_no_byte_it_leaves_out(tmp_path):
    """Acceptance 2 of issue 37: 2 ranks x 2 workers, 10,000 keys left out and a predicate; the bytes
    every worker read (``ds.stats()``) are exactly the spans of the samples handed out."""
    from shardstream.format import decode_offsets

    total, out = 100_000, {f"s{i:06d}" for i in range(3, 100_000, 10)}
    with open(tmp_path / "m.jsonl", "w") as handle:
        for i in range(total):
            handle.write(
                json.dumps({"id": f"s{i:06d}", "txt": "t" * (i % 300), "num_tokens": i % 1009}) + "\n"
            )
    pack(
        tmp_path / "m.jsonl", tmp_path / "d", PackOptions(cost="num_tokens", max_count=2_000), progress=False
    )
    (tmp_path / "out.txt").write_text("\n".join(sorted(out)) + "\n")
    sizes = {}
    for number, sidecar in enumerate(sorted((tmp_path / "d").glob("*.tar.offsets"))):
        offsets = decode_offsets(sidecar.read_bytes())
        for i in range(len(offsets) - 1):
            sizes[f"s{number * 2_000 + i:06d}"] = offsets[i + 1] - offsets[i]
    steps, seen, read = set(), [], 0
    for rank in range(2):
        ds = ShardDataset(
            tmp_path / "d",
            rank=rank,
            world_size=2,
            exclude=tmp_path / "out.txt",
            where="cost >= 50",
            decode=False,
        )
        loader = DataLoader(ds, batch_size=32, num_workers=2, collate_fn=list)
        keys = [s["__key__"] for batch in loader for s in batch]
        steps.add(len(keys))
        seen += keys
        rows = ds.stats()["workers"]
        read += sum(row["counts"]["bytes"] for name, row in rows.items() if name != "main")  # the readers'
    kept = {f"s{i:06d}" for i in range(total) if f"s{i:06d}" not in out and i % 1009 >= 50}
    assert len(steps) == 1 and len(seen) == len(set(seen)) and set(seen) <= kept
    assert len(kept) - len(seen) <= 1
    assert read == sum(sizes[k] for k in seen)  # not one byte of a sample left out (or of one not handed out)


def test_a_subset_of_a_dataset_over_http_reads_its_kept_samples(tmp_path, nginx_server):
    _pack(nginx_server.root / "h")
    url = f"{nginx_server.url}/h/d/shardstream-index.json"
    (tmp_path / "out.txt").write_text("".join(f"{_keys(i)}\n" for i in range(1, SAMPLES, 4)))
    make_subset(url, tmp_path / "sub", SubsetOptions(exclude=tmp_path / "out.txt", where="cost >= 3"))
    kept = sorted(_keys(i) for i in range(SAMPLES) if i % 4 != 1 and i % 97 >= 3)
    for workers in (0, 2):
        keys = _read(ShardDataset(tmp_path / "sub", decode=False, buffer_size=10), workers)
        assert sorted(keys) == kept


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    low=st.integers(0, 96),
    width=st.integers(1, 96),
    parity=st.sampled_from([None, 0, 1]),
    world=st.integers(1, 3),
)
@example(low=96, width=1, parity=1, world=1)  # keeps nothing: refused, naming the count
def test_random_predicates_keep_exactly_what_they_say_with_equal_ranks(dataset, low, width, parity, world):
    where = f"cost >= {low} and cost < {low + width}" + (
        f" and cost % 2 == {parity}" if parity is not None else ""
    )
    cost = [i % 97 for i in range(SAMPLES)]
    kept = {
        _keys(i)
        for i in range(SAMPLES)
        if low <= cost[i] < low + width and (parity is None or cost[i] % 2 == parity)
    }
    if not kept:
        with pytest.raises(ValueError, match="keep none of the 240 samples"):
            ShardDataset(dataset, where=where)
        return
    seen, sizes = [], set()
    for rank in range(world):
        keys = _read(
            ShardDataset(dataset, where=where, rank=rank, world_size=world, decode=False, buffer_size=9)
        )
        sizes.add(len(keys))
        seen += keys
    assert sizes == {len(kept) // world}
    assert len(seen) == len(set(seen)) and set(seen) <= kept


def test_a_scheduled_mixture_of_a_subset_switches_at_its_step_on_both_ranks_reading_only_kept_samples(
    dataset, tmp_path
):
    """A subset (no cost-0..9 sample, every third key out) and the whole dataset, weights switching at
    global step 6 (batches of 4, 2 workers): on 2 ranks, equal steps, the subset's batches before step 6
    and the whole's after, and nothing the subset leaves out read from it."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    from streamer import Mixture

    (tmp_path / "out.txt").write_text("".join(f"{_keys(i)}\n" for i in range(0, SAMPLES, 3)))
    make_subset(dataset, tmp_path / "sub", SubsetOptions(exclude=tmp_path / "out.txt", where="cost >= 10"))
    kept = {_keys(i) for i in range(SAMPLES) if i % 3 and i % 97 >= 10}
    switch = {"sub": {"stages": [[0, 1], [6, 0]]}, "all": {"stages": [[0, 0], [6, 1]]}}
    paths = {"sub": str(tmp_path / "sub"), "all": str(dataset)}
    sources = [{"path": paths[n], "name": n, "weight": switch[n], "decode": False} for n in paths]
    steps, read = [], []
    for rank in range(2):
        mix = Mixture(sources, epoch_size=96, batch_size=4, rank=rank, world_size=2)
        loader = StatefulDataLoader(mix, batch_size=4, num_workers=2, collate_fn=list)
        batches = [[(s["__source__"], s["__key__"]) for s in batch] for batch in loader]
        steps.append(len(batches))
        for step, batch in enumerate(batches):
            assert {source for source, _ in batch} == ({"sub"} if step < 6 else {"all"}), (rank, step)
        read += [key for batch in batches for source, key in batch if source == "sub"]
    assert steps == [12, 12]
    assert len(read) == len(set(read)) == 2 * 6 * 4 and set(read) <= kept


def _random_subset(dataset, out, keep):
    """A subset index keeping sample i where ``keep[i]``, written as ``make_subset`` writes one."""
    index = dataset / "shardstream-index.json"
    counts = [35] * (SAMPLES // 35) + ([SAMPLES % 35] if SAMPLES % 35 else [])
    bits, ends = np.array(keep), np.cumsum(counts)
    masks = [bits[end - count : end] for count, end in zip(counts, ends, strict=True)]
    write_subset(
        out, dataset=str(index), index_bytes=index.read_bytes(), counts=np.array(counts), masks=masks
    )
    return {_keys(i) for i in range(SAMPLES) if keep[i]}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    keep=st.lists(st.booleans(), min_size=SAMPLES, max_size=SAMPLES).filter(any),
    world=st.integers(1, 3),
    workers=st.integers(0, 2),
    budget=st.sampled_from([96, 200, 512]),
    mode=st.sampled_from(["pack", "pad"]),
)
def test_budgets_over_random_masks_give_equal_batches_within_budget_and_only_kept_samples(
    dataset, tmp_path_factory, keep, world, workers, budget, mode
):
    """Acceptance 1 of issue 37 with token budgets: every rank the same number of batches (the plan's
    ``steps``), every batch within its budget, no left-out sample, none twice unless counted as
    repeated, what is not read counted (but the ranks' remainder, which ``drop`` leaves)."""
    out = tmp_path_factory.mktemp("budgetmask")
    kept = _random_subset(dataset, out, keep)
    seen, lengths, left_out, repeated = [], set(), 0, 0
    for rank in range(world):
        ds = ShardDataset(out, rank=rank, world_size=world, decode=False, batch_tokens=budget, batching=mode)
        batches = list(DataLoader(ds, batch_size=None, num_workers=workers))
        lengths.add((len(batches), ds.steps(max(workers, 1))))
        for batch in batches:
            costs = [s["__cost__"] for s in batch]
            assert (sum(costs) if mode == "pack" else len(costs) * max(costs, default=0)) <= budget
            seen += [s["__key__"] for s in batch]
        left_out += ds.errors["samples_left_out"]
        repeated += ds.errors["samples_repeated"]
    assert len(lengths) == 1 and len({n for pair in lengths for n in pair}) == 1, lengths
    # A sample twice only where a slot holds fewer samples than batches (none but a tiny epoch), counted
    assert set(seen) <= kept and len(seen) - len(set(seen)) == repeated
    assert 0 <= len(kept) - len(set(seen)) - left_out < world  # the rest counted, but the ranks' remainder


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    keep=st.lists(st.booleans(), min_size=SAMPLES, max_size=SAMPLES).filter(lambda k: sum(k) >= 12),
    old=st.tuples(st.integers(1, 3), st.integers(0, 2)),
    new=st.tuples(st.integers(1, 3), st.integers(0, 2)),
    cut=st.integers(1, 8),
)
def test_an_elastic_restore_over_random_masks_reads_each_kept_sample_at_most_once_with_equal_ranks(
    dataset, tmp_path_factory, keep, old, new, cut
):
    """Acceptance 1 of issue 37, elastic: a subset's checkpoint, taken after ``cut`` batches of 3 on
    (world, workers) ``old`` and gathered, continues on ``new``: equal samples on every new rank, no
    left-out sample, none read twice over both runs, and what neither read bounded by the two deals'
    remainders."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    out = tmp_path_factory.mktemp("elasticmask")
    kept = _random_subset(dataset, out, keep)

    def run(world, workers, states=None, stop=None):
        keys, saved = [], []
        for rank in range(world):
            ds = ShardDataset(out, rank=rank, world_size=world, decode=False, buffer_size=8)
            if states is not None:
                ds.load_state_dict(pickle.loads(pickle.dumps(states)))
            loader = StatefulDataLoader(ds, batch_size=3, num_workers=workers, collate_fn=list)
            got = []
            for n, batch in enumerate(loader):
                got += [s["__key__"] for s in batch]
                if n + 1 == stop:
                    break
            saved.append(loader.state_dict())
            keys.append(got)
        return keys, saved

    before, states = run(*old, stop=cut)
    after, _ = run(*new, states=states)
    assert len({len(rank) for rank in after}) == 1
    seen = [k for rank in before + after for k in rank]
    assert len(seen) == len(set(seen)) and set(seen) <= kept
    assert len(kept) - len(seen) < old[0] + new[0]  # what "drop" leaves of each deal


def test_a_budgeted_slot_with_fewer_samples_than_batches_repeats_one_and_counts_it(dataset, tmp_path):
    """One kept sample: the target (its drain and margin: 2 batches) is the same on every slot whatever
    it holds, so the slot repeats its sample in the batch it still owes, and counts it (found by the
    random-mask test above: the repeat was not counted)."""
    kept = _random_subset(dataset, tmp_path / "one", [i == 239 for i in range(SAMPLES)])
    ds = ShardDataset(tmp_path / "one", decode=False, batch_tokens=96)
    batches = [[s["__key__"] for s in b] for b in DataLoader(ds, batch_size=None)]
    assert batches == [sorted(kept)] * 2 and ds.steps(1) == 2
    assert ds.errors["samples_repeated"] == 1
