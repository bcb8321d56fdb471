"""A hostile or stale offsets sidecar (issue 32, item 2): spans past the shard's end (1 TiB, 2^63) are
damage named by shard and byte offset, counted under ``on_error="skip"``; nothing allocates the span a
sidecar declares. Every reader that trusts a sidecar: deferred reads, ``ShardMap`` and ``read_range``."""

from __future__ import annotations

from pathlib import Path

import pytest

from shardstream.errors import ShardReadError
from shardstream.format import decode_offsets, encode_offsets, offsets_name
from shardstream.io.openers import read_range
from streamer import ShardDataset, ShardMap
from tests.conftest import write_dataset

pytestmark = pytest.mark.timeout(60)

SPANS = {"1-TiB": 1 << 40, "2^63": 1 << 63, "2^64-16": (1 << 64) - 16}  # the sidecar holds uint64s


def _lying(tmp_path: Path, end: int) -> tuple[Path, Path]:
    """Two shards of 6 samples; the second's sidecar says its sample 3 ends at byte ``end``."""
    index = write_dataset(tmp_path / "d", [6, 6], payload=300)
    shard = index.parent / "train-000001.tar"
    sidecar = Path(offsets_name(str(shard)))
    offsets = list(decode_offsets(sidecar.read_bytes()))
    offsets[4:] = [end + k for k in range(len(offsets) - 4)]  # still increasing, as the format requires
    sidecar.write_bytes(encode_offsets(offsets))
    return index, shard


@pytest.mark.parametrize("end", SPANS.values(), ids=SPANS.keys())
def test_deferred_reads_refuse_a_span_past_the_shard(tmp_path, end):
    index, _ = _lying(tmp_path, end)
    lying = r"train-000001\.tar at byte \d+: the offsets sidecar puts sample"
    with pytest.raises(ShardReadError, match=lying):
        list(ShardDataset(index, decode=False, seed=1, defer_reads=True))
    shuffled = ShardDataset(index, decode=False, seed=1, defer_reads=True, on_error="skip", keep_length=False)
    keys = [s["__key__"] for s in shuffled]
    assert len(keys) == len(set(keys)) == 12 - 3  # the lying sidecar's samples 3, 4 and 5 are lost
    assert shuffled.errors["samples_skipped"] == 3 and shuffled.errors["shards_failed"] == 1


@pytest.mark.parametrize("end", SPANS.values(), ids=SPANS.keys())
def test_random_access_refuses_a_span_past_the_shard(tmp_path, end):
    index, shard = _lying(tmp_path, end)
    samples = ShardMap(index, decode=False)
    assert samples[6]["__key__"] == "s001-00000"
    with pytest.raises(ShardReadError, match=r"train-000001\.tar"):
        samples[6 + 4]
    with pytest.raises(ShardReadError, match=r"ends after \d+ of the \d+ bytes asked for"):
        read_range(str(shard), 1024, end)
