"""Zero-copy reads and the raw batch transport: the same bytes as the default, without the copies."""

from __future__ import annotations

import gc
import os
import pickle
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from shardstream.errors import ShardReadError
from streamer import RawBatch, ShardDataset, raw_collate
from tests.conftest import START_METHODS, write_dataset


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("zc"), [37, 50, 13, 41], payload=300)


def _by_key(samples) -> dict[str, dict[str, bytes]]:
    found = {}
    for sample in samples:
        assert sample["__key__"] not in found, f"{sample['__key__']} twice"
        found[sample["__key__"]] = {k: bytes(v) for k, v in sample.items() if not k.startswith("__")}
    return found


def _mapped(path: Path) -> bool:
    return any(str(path) in line for line in Path("/proc/self/maps").read_text().splitlines())


@pytest.mark.parametrize("defer_reads", [True, False])  # read as samples leave the buffer, or in order
def test_zero_copy_members_are_read_only_views_with_the_default_bytes(index, defer_reads):
    default = _by_key(ShardDataset(str(index), decode=False, seed=3))
    samples = list(ShardDataset(str(index), decode=False, seed=3, zero_copy=True, defer_reads=defer_reads))
    assert _by_key(samples) == default and len(default) == 141
    assert all(isinstance(s["txt"], memoryview) and s["txt"].readonly for s in samples)
    with pytest.raises(TypeError):
        samples[0]["txt"][0] = 0
    ordered = [s["__key__"] for s in samples]
    assert ordered == [s["__key__"] for s in ShardDataset(str(index), decode=False, seed=3)]


def test_a_view_keeps_its_shard_mapped_and_the_mapping_goes_with_the_last_view(index):
    shard = index.parent / "train-000001.tar"
    kept = [s["txt"] for s in ShardDataset(str(index), decode=False, shuffle=False, zero_copy=True)]
    gc.collect()
    assert _mapped(shard)
    expected = [s["txt"] for s in ShardDataset(str(index), decode=False, shuffle=False)]
    assert [bytes(v) for v in kept] == expected  # still valid after the dataset is done with them
    del kept
    gc.collect()
    assert not _mapped(shard)


def test_zero_copy_needs_raw_samples(index):
    with pytest.raises(ValueError, match="zero_copy=True hands out raw read-only buffers"):
        ShardDataset(str(index), zero_copy=True)


@pytest.mark.parametrize("zero_copy", [True, False])
@pytest.mark.parametrize("context", START_METHODS)
def test_raw_batches_from_workers_give_back_every_member_byte_identical(index, zero_copy, context):
    default = _by_key(ShardDataset(str(index), decode=False))
    dataset = ShardDataset(str(index), decode=False, zero_copy=zero_copy)
    loader = DataLoader(
        dataset, batch_size=16, num_workers=2, collate_fn=raw_collate, multiprocessing_context=context
    )
    batches = list(loader)
    assert all(isinstance(b, RawBatch) for b in batches)
    assert _by_key(s for b in batches for s in b) == default
    for name in ("txt", "cls"):  # columns: the first member of each sample and the one after it
        by_column = {k: bytes(v) for b in batches for k, v in zip(b["__key__"], b[name], strict=True)}
        assert by_column == {k: members[name] for k, members in default.items()}
    if zero_copy:  # members went as references into the shards, not through the block
        assert all(b.block.numel() == 0 and len(b.files) >= 1 for b in batches)
    else:
        assert all(not b.files and b.block.numel() > 0 for b in batches)
    gathered = batches[0].gathered()
    assert [dict(s) for s in map(_plain, gathered)] == [dict(s) for s in map(_plain, batches[0])]
    assert gathered.block.numel() == sum(
        len(v) for s in batches[0] for k, v in s.items() if not k.startswith("__")
    )


def _plain(sample):
    return {k: bytes(v) if isinstance(v, memoryview) else v for k, v in sample.items()}


def test_a_batch_keeps_keys_values_and_mixed_members_and_crosses_by_pickle(index):
    samples = list(ShardDataset(str(index), decode=False, shuffle=False, zero_copy=True))[:5]
    samples[1] = {**samples[1], "extra": b"copied", "label": 7}
    batch = raw_collate(samples)
    assert batch.block.numel() == len(b"copied")
    back = pickle.loads(pickle.dumps(batch))
    for ours in (batch, back):
        assert [_plain(s) for s in ours] == [_plain(s) for s in samples]
        assert [bytes(v) for v in ours.member("txt")] == [bytes(s["txt"]) for s in samples]
        for name in ("txt", "cls"):  # columns of unlike samples (one has more members)
            assert [bytes(v) for v in ours[name]] == [bytes(s[name]) for s in samples]
        assert ours["__key__"] == [s["__key__"] for s in samples]
        assert ours[1]["label"] == 7 and ours[-1]["__key__"] == samples[-1]["__key__"]
        with pytest.raises(KeyError, match="member 'label' is in 1 of the batch's 5 samples"):
            ours["label"]
    with pytest.raises(KeyError, match="member 'extra' is in 1 of the batch's 5 samples"):
        batch.member("extra")
    with pytest.raises(KeyError, match="member 'label' is in 0 of"):
        batch.member("label")  # a value, not a raw member


def test_a_batch_of_references_only_crosses_without_a_block(index):
    samples = list(ShardDataset(str(index), decode=False, shuffle=False, zero_copy=True))[:8]
    batch = raw_collate(samples)
    back = pickle.loads(pickle.dumps(batch))
    assert batch.block.numel() == back.block.numel() == 0 and back.block.dtype == torch.uint8
    assert [_plain(s) for s in back] == [_plain(s) for s in samples]


def test_a_shard_replaced_while_its_batch_is_in_flight_is_an_error_not_other_bytes(tmp_path):
    index = write_dataset(tmp_path / "data", [20])
    samples = list(ShardDataset(str(index), decode=False, shuffle=False, zero_copy=True))
    flying = pickle.dumps(raw_collate(samples))
    shard = tmp_path / "data" / "train-000000.tar"
    replacement = tmp_path / "new.tar"
    replacement.write_bytes(shard.read_bytes()[::-1])
    os.replace(replacement, shard)
    with pytest.raises(ShardReadError, match="changed on disk"):
        list(pickle.loads(flying))


def _written_long_ago(shard: Path) -> None:
    """An mtime an hour back, so that a rewrite now changes it even on a coarse timestamp clock."""
    info = shard.stat()
    os.utime(shard, ns=(info.st_atime_ns, info.st_mtime_ns - 3600 * 10**9))


def _rewrite_in_place(shard: Path, *, grow: bool) -> None:
    """Other bytes into the same inode (no rename): reversed, with or without a longer tail."""
    data = shard.read_bytes()
    inode = shard.stat().st_ino
    with shard.open("r+b") as file:
        file.truncate(0)
        file.write(data[::-1] + (b"\0" * 512 if grow else b""))
    assert shard.stat().st_ino == inode


@pytest.mark.timeout(60)
@pytest.mark.parametrize("grow", [True, False], ids=["new-size", "same-size-new-mtime"])
def test_a_shard_rewritten_in_place_while_its_batch_is_in_flight_is_an_error(tmp_path, grow):
    """Same path, same inode: only the size and the mtime say the bytes the worker saw are gone."""
    index = write_dataset(tmp_path / "data", [20])
    shard = tmp_path / "data" / "train-000000.tar"
    _written_long_ago(shard)
    samples = list(ShardDataset(str(index), decode=False, shuffle=False, zero_copy=True))
    flying = pickle.dumps(raw_collate(samples))  # how a worker's batch crosses to the main process
    del samples
    _rewrite_in_place(shard, grow=grow)
    with pytest.raises(ShardReadError, match="changed on disk"):
        list(pickle.loads(flying))


@pytest.mark.timeout(60)
def test_a_shard_rewritten_in_place_after_the_main_process_mapped_it_is_an_error(tmp_path):
    """The main process keeps the mappings of recent batches' shards: a later batch of that shard, made
    before the rewrite, must not be read through the kept mapping, which now shows the new bytes."""
    index = write_dataset(tmp_path / "data", [20])
    shard = tmp_path / "data" / "train-000000.tar"
    _written_long_ago(shard)
    samples = list(ShardDataset(str(index), decode=False, shuffle=False, zero_copy=True))
    first, second = pickle.dumps(raw_collate(samples[:10])), pickle.dumps(raw_collate(samples[10:]))
    expected = [_plain(s) for s in samples[:10]]
    del samples
    assert [_plain(s) for s in pickle.loads(first)] == expected  # mapped here, and kept
    _rewrite_in_place(shard, grow=False)
    with pytest.raises(ShardReadError, match="changed on disk"):
        list(pickle.loads(second))


@pytest.mark.timeout(120)
def test_members_copied_into_a_batch_block_are_read_only_as_mapped_ones_are(index):
    """Copied members (zero_copy=False: bytes; or mixed into a batch of references) come out of the
    block as read-only views: a decoder writing into one would change the batch for every other reader."""
    loader = DataLoader(
        ShardDataset(str(index), decode=False, zero_copy=False, shuffle=False),
        batch_size=16,
        num_workers=1,
        collate_fn=raw_collate,
        multiprocessing_context="fork",
    )
    from_worker = next(iter(loader))
    assert from_worker.block.numel() > 0 and not from_worker.files  # every member went through the block
    mapped = list(ShardDataset(str(index), decode=False, shuffle=False, zero_copy=True))[:4]
    mixed = raw_collate([{**mapped[0], "extra": b"copied"}, *mapped[1:]])
    assert mixed.block.numel() == len(b"copied")
    in_process = raw_collate(list(ShardDataset(str(index), decode=False, shuffle=False))[:4])
    for batch in (from_worker, in_process, pickle.loads(pickle.dumps(in_process)), mixed, mixed.gathered()):
        members = [v for s in batch for k, v in s.items() if not k.startswith("__")]
        members += batch["txt"] + batch.member("cls")
        assert members and all(isinstance(v, memoryview) and v.readonly for v in members)
        with pytest.raises(TypeError):
            members[0][0] = 0
    assert mixed[0]["extra"].readonly and mixed[0]["txt"].readonly


def test_pinned_batches_when_a_gpu_is_there(index):
    if not torch.cuda.is_available():
        pytest.skip("pin_memory needs CUDA")
    loader = DataLoader(
        ShardDataset(str(index), decode=False, zero_copy=True),
        batch_size=16,
        num_workers=2,
        collate_fn=raw_collate,
        pin_memory=True,
    )
    batches = list(loader)
    assert all(b.block.is_pinned() and not b.files for b in batches)
    assert _by_key(s for b in batches for s in b) == _by_key(ShardDataset(str(index), decode=False))


def test_zero_copy_resumes_to_the_uninterrupted_stream(index):
    whole = [s["__key__"] for s in ShardDataset(str(index), decode=False, seed=5, zero_copy=True)]
    first = ShardDataset(str(index), decode=False, seed=5, zero_copy=True)
    stream = iter(first)
    head = [next(stream)["__key__"] for _ in range(60)]
    state = first.state_dict()
    second = ShardDataset(str(index), decode=False, seed=5, zero_copy=True)
    second.load_state_dict(state)
    assert head + [s["__key__"] for s in second] == whole


def test_member_offsets_in_c_and_in_numpy_agree(index):
    from shardstream.format import _tarscan
    from streamer.batch.rawbatch import _numpy_offset_in

    samples = list(ShardDataset(str(index), decode=False, shuffle=False, zero_copy=True))
    for sample in samples:
        member, mapping = sample["txt"], sample["txt"].obj
        assert _tarscan.offset_in(member, mapping) == _numpy_offset_in(member, mapping) > 0
    other = samples[-1]["cls"].obj  # the last shard's mapping: not where the first member lies
    assert other is not samples[0]["txt"].obj
    assert _tarscan.offset_in(samples[0]["txt"], other) == -1
