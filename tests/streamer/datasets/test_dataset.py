"""ShardDataset through a real DataLoader: exactly once, equal batches per rank, epochs, foreign shards."""

from __future__ import annotations

import warnings
from collections import Counter

import pytest
import torch
from torch.utils.data import DataLoader

from streamer import ShardDataset
from tests.conftest import SHARED, START_METHODS, read_with_webdataset, write_dataset

UNEVEN = [50, 1, 0, 7, 120, 3, 19]


@pytest.fixture(scope="module")
def uneven(tmp_path_factory):
    return write_dataset(tmp_path_factory.mktemp("uneven"), UNEVEN)


def _keys(batch):
    return [sample["__key__"] for sample in batch]


def _run_rank(index, rank, world, workers, *, batch_size=4, epoch=0, context=None, **kwargs):
    kwargs.setdefault("buffer_size", 16)
    ds = ShardDataset(index, decode=False, rank=rank, world_size=world, **kwargs)
    ds.set_epoch(epoch)
    loader = DataLoader(
        ds,
        batch_size=batch_size,
        num_workers=workers,
        collate_fn=_keys,
        multiprocessing_context=context if workers else None,
    )
    batches = list(loader)
    return batches, len(ds)


@pytest.mark.parametrize(
    ("world", "workers", "context"),
    [(1, 0, None), (1, 2, "fork"), (3, 2, "fork"), (2, 3, "fork"), (2, 2, "forkserver"), (2, 2, "spawn")],
)
def test_every_sample_once_and_equal_batches_per_rank(uneven, world, workers, context):
    seen = Counter()
    batch_counts = set()
    for rank in range(world):
        batches, expected = _run_rank(uneven, rank, world, workers, context=context)
        keys = [k for batch in batches for k in batch]
        assert len(keys) == expected
        seen.update(keys)
        batch_counts.add(len(batches))
    total = sum(UNEVEN)
    assert len(batch_counts) == 1
    assert max(seen.values()) == 1
    assert total - len(seen) < world


def test_pad_repeats_instead_of_dropping(uneven):
    seen = Counter()
    for rank in range(3):
        batches, _ = _run_rank(uneven, rank, 3, 2, remainder="pad")
        seen.update(k for batch in batches for k in batch)
    assert len(seen) == sum(UNEVEN) and sum(seen.values()) == 3 * -(-sum(UNEVEN) // 3)


def test_stream_is_a_pure_function_of_seed_epoch_world_workers(uneven):
    a, _ = _run_rank(uneven, 1, 2, 2, epoch=3, seed=11)
    b, _ = _run_rank(uneven, 1, 2, 2, epoch=3, seed=11)
    c, _ = _run_rank(uneven, 1, 2, 2, epoch=4, seed=11)
    assert a == b and a != c


@pytest.mark.parametrize("context", START_METHODS)
def test_set_epoch_reaches_persistent_workers(uneven, context):
    ds = ShardDataset(uneven, decode=False, buffer_size=8)
    loader = DataLoader(
        ds,
        batch_size=8,
        num_workers=2,
        persistent_workers=True,
        collate_fn=_keys,
        multiprocessing_context=context,
    )
    epoch0 = list(loader)
    ds.set_epoch(1)
    epoch1 = list(loader)
    fresh, _ = _run_rank(uneven, 0, 1, 2, batch_size=8, epoch=1, buffer_size=8)
    assert epoch1 == fresh and epoch1 != epoch0
    assert sorted(k for b in epoch0 for k in b) == sorted(k for b in epoch1 for k in b)


def test_len_and_unshuffled_order(uneven):
    ds = ShardDataset(uneven, decode=False, shuffle=False)
    keys = [s["__key__"] for s in ds]
    assert len(ds) == len(keys) == sum(UNEVEN)
    assert keys == sorted(keys)
    assert len(ShardDataset(uneven, world_size=3, rank=2)) == sum(UNEVEN) // 3


def test_pattern_without_index_warns_and_deals_whole_shards(uneven):
    pattern = str(uneven.parent / "train-{000000..000006}.tar")
    seen = Counter()
    for rank in range(2):
        ds = ShardDataset(pattern, decode=False, rank=rank, world_size=2)
        with pytest.warns(UserWarning, match="no per-shard sample counts"):
            seen.update(s["__key__"] for s in ds)
    assert len(seen) == sum(UNEVEN) and max(seen.values()) == 1
    with pytest.raises(TypeError, match="per-shard counts"):
        len(ShardDataset(pattern))


def test_fields_keeps_only_the_members_asked_for(uneven):
    ds = ShardDataset(uneven, decode=False, fields=["cls"], shuffle=False)
    sample = next(iter(ds))
    assert set(sample) == {"__key__", "__url__", "cls"}


def test_resampled_is_endless_and_deterministic(uneven):
    def take(n):
        ds = ShardDataset(uneven, decode=False, resampled=True, seed=5, buffer_size=4)
        it = iter(ds)
        return [next(it)["__key__"] for _ in range(n)]

    first = take(400)
    assert first == take(400) and len(first) == 400 > sum(UNEVEN)


@pytest.mark.parametrize("name", sorted(p.name for p in (SHARED / "foreign-shards").glob("*.t*")))
def test_reads_foreign_shards_like_webdataset(name):
    path = str(SHARED / "foreign-shards" / name)
    ours = {
        s["__key__"]: {k: v for k, v in s.items() if not k.startswith("__")}
        for s in ShardDataset(path, decode=False, shuffle=False)
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = read_with_webdataset(path)
    expected = {
        "webdataset-sample.tgz": 90,
        "webdataset-mpdata.tar": 100,
        "webdataset-tendata.tar": 100,
        "webdataset-testgz.tar": 1000,
        "webdataset-compressed.tar": 3,
    }
    assert ours == theirs and len(ours) == expected[name]


def test_reads_webdataset_shardwriter_and_gnu_tar_output(tmp_path, uneven):
    import subprocess

    import webdataset as wds

    with wds.ShardWriter(str(tmp_path / "wds-%06d.tar"), maxcount=30) as sink:
        for i in range(70):
            sink.write({"__key__": f"k{i:04d}", "txt": f"text {i}", "cls": i})
    pattern = str(tmp_path / "wds-{000000..000002}.tar")
    ours = [s["__key__"] for s in ShardDataset(pattern, decode=False, shuffle=False)]
    assert ours == [f"k{i:04d}" for i in range(70)]
    src = tmp_path / "src"
    src.mkdir()
    for i in range(5):
        (src / f"{i}.txt").write_text(str(i))
    subprocess.run(["tar", "cf", str(tmp_path / "gnu.tar"), "-C", str(src), "."], check=True)
    subprocess.run(["tar", "czf", str(tmp_path / "gnu.tar.gz"), "-C", str(src), "."], check=True)
    for name in ("gnu.tar", "gnu.tar.gz"):
        got = {s["__key__"]: s["txt"] for s in ShardDataset(str(tmp_path / name), decode=False)}
        assert got == {f"./{i}": str(i).encode() for i in range(5)}


def test_bad_options_are_value_errors(uneven):
    with pytest.raises(ValueError, match="on_error"):
        ShardDataset(uneven, on_error="ignore")
    with pytest.raises(ValueError, match="remainder"):
        ShardDataset(uneven, remainder="keep")
    with pytest.raises(ValueError, match="buffer_size"):
        ShardDataset(uneven, buffer_size=0)
    with pytest.raises(ValueError, match="rank must be in"):
        len(ShardDataset(uneven, rank=3, world_size=2))
    assert torch.utils.data.IterableDataset in type(ShardDataset(uneven)).__mro__
