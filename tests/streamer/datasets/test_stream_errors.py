"""Corrupt, truncated and missing shards mid-dataset: skip keeps every good sample and counts the bad;
raise names the shard, the member and the byte offset. Nothing hangs."""

from __future__ import annotations

import pickle
import shutil
import subprocess
import sys
import textwrap

import pytest
from torch.utils.data import DataLoader

from shardstream.errors import ShardReadError
from shardstream.format import decode_offsets
from streamer import ShardDataset
from tests.conftest import START_METHODS, write_dataset

COUNTS = [10, 12, 9, 11, 8]


@pytest.fixture
def damaged(tmp_path):
    """Shard 1: sample 4's header corrupt. Shard 2: cut in the middle of sample 6. Shard 3: missing."""
    index = write_dataset(tmp_path / "d", COUNTS)
    root = index.parent
    one = root / "train-000001.tar"
    offsets = decode_offsets((root / "train-000001.tar.offsets").read_bytes())
    data = bytearray(one.read_bytes())
    data[offsets[4] + 5] ^= 0x55  # inside the name field: the checksum no longer matches
    one.write_bytes(bytes(data))
    two = root / "train-000002.tar"
    offsets2 = decode_offsets((root / "train-000002.tar.offsets").read_bytes())
    two.write_bytes(two.read_bytes()[: offsets2[6] + 700])
    shutil.move(root / "train-000003.tar", root / "moved-away.tar")
    bad = {("s001-00004")} | {f"s002-{i:05d}" for i in range(6, 9)} | {f"s003-{i:05d}" for i in range(11)}
    good = {f"s{n:03d}-{i:05d}" for n, c in enumerate(COUNTS) for i in range(c)} - bad
    return index, good, bad, offsets[4]


@pytest.mark.parametrize(("workers", "context"), [(0, None), *((2, method) for method in START_METHODS)])
def test_skip_yields_every_good_sample_and_counts_the_bad(damaged, workers, context):
    """The counts are summed across workers, whichever way the workers were started."""
    index, good, bad, _ = damaged
    ds = ShardDataset(index, decode=False, on_error="skip", buffer_size=4, keep_length=False)
    loader = DataLoader(ds, batch_size=None, num_workers=workers, multiprocessing_context=context)
    keys = [s["__key__"] for s in loader]
    assert len(keys) == len(set(keys)) and set(keys) == good
    assert ds.errors["samples_skipped"] == len(bad)
    assert ds.errors["shards_failed"] >= 2  # the cut shard's tail and the missing shard
    assert ds.errors["samples_repeated"] == 0


def test_the_counts_go_with_a_pickled_copy_and_one_epoch_adds_to_them(damaged):
    index, _, bad, _ = damaged
    ds = ShardDataset(index, decode=False, on_error="skip", buffer_size=4, keep_length=False)
    list(DataLoader(ds, batch_size=None, num_workers=2))
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.errors == ds.errors and copy.errors["samples_skipped"] == len(bad)
    list(copy)  # in this process, on top of what the workers counted
    assert copy.errors["samples_skipped"] == 2 * len(bad) and ds.errors["samples_skipped"] == len(bad)


def test_reading_through_fork_workers_starts_no_helper_process(damaged):
    """The counters need no lock, so no named semaphore and no resource tracker: that interpreter cost
    ~40 ms of CPU at the first dataset, as much as a DataLoader epoch of 10,000 raw samples."""
    index = damaged[0]
    script = textwrap.dedent(f"""
        import multiprocessing.resource_tracker as tracker
        from torch.utils.data import DataLoader
        from streamer import ShardDataset
        ds = ShardDataset({str(index)!r}, decode=False, on_error="skip", buffer_size=4, keep_length=False)
        loader = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork")
        keys = [s["__key__"] for s in loader]
        print(len(keys), ds.errors["samples_skipped"], tracker._resource_tracker._pid)
    """)
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    count, skipped, tracker_pid = run.stdout.split()
    assert int(count) == sum(COUNTS) - int(skipped) and int(skipped) > 0
    assert tracker_pid == "None"


@pytest.mark.parametrize("workers", [0, 2])
def test_skip_keeps_every_rank_at_its_length_by_repeating_good_samples(damaged, workers):
    """A damaged shard must not leave one rank a step short: that is a DDP hang."""
    index, good, bad, _ = damaged
    lengths, seen = [], set()
    for rank in range(2):
        ds = ShardDataset(index, decode=False, on_error="skip", buffer_size=4, rank=rank, world_size=2)
        keys = [s["__key__"] for s in DataLoader(ds, batch_size=None, num_workers=workers)]
        lengths.append(len(keys))
        seen |= set(keys)
        assert len(keys) == len(ds)
    assert lengths[0] == lengths[1] == sum(COUNTS) // 2
    assert seen <= good and not seen & bad


def test_warn_warns_and_skips(damaged):
    index, good, _, _ = damaged
    ds = ShardDataset(index, decode=False, on_error="warn", shuffle=False)
    with pytest.warns(UserWarning, match="skipping"):
        keys = {s["__key__"] for s in ds}
    assert keys == good


def test_raise_names_shard_member_and_offset(damaged):
    index, _, _, offset = damaged
    ds = ShardDataset(index, decode=False, shuffle=False)
    with pytest.raises(ShardReadError) as info:
        for _ in ds:
            pass
    error = info.value
    assert error.url.endswith("train-000001.tar") and error.offset == offset
    assert f"at byte {offset}" in str(error) and "checksum" in str(error)


def test_raise_on_truncation_names_the_member(tmp_path):
    index = write_dataset(tmp_path / "t", [5])
    shard = index.parent / "train-000000.tar"
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) - 1024 - 300])  # into the last member's data
    with pytest.raises(ShardReadError, match=r"member 's000-00004\.(txt|cls)' at byte \d+: truncated"):
        list(ShardDataset(index, decode=False, shuffle=False))


@pytest.mark.parametrize("context", START_METHODS)
def test_a_worker_error_reaches_the_main_process(damaged, context):
    index, _, _, _ = damaged
    loader = DataLoader(
        ShardDataset(index, decode=False, shuffle=False),
        batch_size=None,
        num_workers=2,
        multiprocessing_context=context,
    )
    with pytest.raises(ShardReadError, match=r"Caught ShardReadError(.|\n)*train-00000[123]\.tar"):
        list(loader)


def test_missing_shard_raises_with_its_url(damaged):
    index, _, _, _ = damaged
    shard = index.parent / "train-000003.tar"
    shard.touch()  # there when the dataset is made (a missing local path is refused then), gone when read
    ds = ShardDataset(str(shard), decode=False)
    shard.unlink()
    with pytest.raises(ShardReadError, match=r"train-000003\.tar: shard not found"):
        list(ds)
