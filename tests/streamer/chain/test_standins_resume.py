"""Stand-ins owed for lost samples survive ShardDataset.state_dict / load_state_dict, mid-repeat included."""

from __future__ import annotations

import io
import tarfile

import torch

from streamer import ShardDataset
from tests.conftest import write_dataset

COUNTS = [6, 5, 7]
BAD = "s002-00003"  # its cls member is made unreadable as a number: a decode error, one stand-in owed


def _damaged(root):
    """Shard 1 missing (5 samples owed after a read error), one undecodable sample in shard 2 (1 owed)."""
    index = write_dataset(root, COUNTS)
    (root / "train-000001.tar").unlink()
    shard = root / "train-000002.tar"
    with tarfile.open(shard) as tar:
        member = tar.getmember(f"{BAD}.cls")
        assert member.size == 1
        at = member.offset_data
    data = bytearray(shard.read_bytes())
    data[at] = ord("x")  # the header (and its checksum) untouched: the bytes read, int() refuses them
    shard.write_bytes(bytes(data))
    return index


def _make(index):
    return ShardDataset(index, on_error="skip", seed=3, buffer_size=4, initial=2)


def _keys(samples):
    return [sample["__key__"] for sample in samples]


def test_a_restored_dataset_goes_on_paying_the_stand_ins_it_owed(tmp_path):
    index = _damaged(tmp_path / "d")
    full = _keys(_make(index))
    assert len(full) == sum(COUNTS) == len(_make(index))  # the rank keeps its length
    assert BAD not in full and len(set(full)) == sum(COUNTS) - 5 - 1
    owed_at = []
    for k in range(len(full) + 1):
        first = _make(index)
        samples = iter(first)
        head = [sample["__key__"] for _, sample in zip(range(k), samples, strict=False)]
        buffer = io.BytesIO()
        torch.save(first.state_dict(), buffer)  # as a training checkpoint keeps it
        state = torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)
        owed_at += [k] if state["node"].get("owed") else []  # {}: saved before the first sample
        second = _make(index)
        second.load_state_dict(state)
        assert head + _keys(second) == full, f"resumed after {k} samples"
    assert owed_at  # some checkpoints fell while stand-ins were still owed, mid-repeat


def test_a_stateful_dataloader_resumed_mid_repeat_keeps_the_length(tmp_path):
    from torchdata.stateful_dataloader import StatefulDataLoader

    index = _damaged(tmp_path / "d")
    full = _keys(_make(index))
    repeated = next(k for k in range(1, len(full)) if full[k] == full[k - 1] == full[k + 1])
    loader = StatefulDataLoader(_make(index), batch_size=None, num_workers=0)
    head = _keys(sample for _, sample in zip(range(repeated), loader, strict=False))
    saved = loader.state_dict()
    resumed = StatefulDataLoader(_make(index), batch_size=None, num_workers=0)
    resumed.load_state_dict(saved)
    tail = _keys(resumed)
    assert head + tail == full and tail[0] == full[repeated - 1]  # the repeat goes on where it stood


def test_checkpoints_taken_right_after_a_restore_and_mid_repeat_keep_the_position(tmp_path):
    """A second checkpoint soon after a resume (before the first sample, or while the stand-ins that the
    first one owed are being repeated, before the reader has run again) must still say where it stands."""
    index = _damaged(tmp_path / "d")
    full = _keys(_make(index))
    for k in range(len(full) + 1):
        first = _make(index)
        head = _keys(sample for _, sample in zip(range(k), first, strict=False))
        saved = first.state_dict()
        for more in (0, 1, 2):
            second = _make(index)
            second.load_state_dict(saved)
            assert second.state_dict() == saved  # loaded, not iterated yet
            samples = iter(second)
            if k:
                assert second.state_dict()["node"] == saved["node"]  # iterated, nothing read yet
            middle = [sample["__key__"] for _, sample in zip(range(more), samples, strict=False)]
            third = _make(index)
            third.load_state_dict(second.state_dict())
            assert head + middle + _keys(third) == full, f"saved after {k}, then after {more} more"
