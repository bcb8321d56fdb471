"""A hostile or stale offsets sidecar (issue 32, item 2): spans past the shard's end (1 TiB, 2^63) are
damage named by shard and byte offset, counted under ``on_error="skip"``; nothing allocates the span a
sidecar declares. Every reader that trusts a sidecar: deferred reads, ``ShardMap`` and ``read_range``; and
the key file's block index, whose offsets ``ShardMap.get`` reads by."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from shardstream.errors import FormatError, ShardReadError
from shardstream.format import INDEX_NAME, decode_offsets, encode_offsets, offsets_name
from shardstream.format.constants import KEYS_NAME
from shardstream.format.keyfile import IDX_SUFFIX
from shardstream.io.openers import read_range
from shardstream_cli import app
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


KEY_IDX_CASES = {"block-end-2^40": "end", "blocks-out-of-order": "order", "first-block-not-at-0": "first"}


@pytest.mark.parametrize("how", KEY_IDX_CASES.values(), ids=KEY_IDX_CASES.keys())
def test_a_hostile_key_block_index_is_named_and_reads_nothing_past_the_file(tmp_path, how):
    """The key file's block index says where each ~64 KiB block of keys lies; one saying 2^40 must cost
    a read of what the file has and a named error, not 1 TiB asked for (issue 32, item 2)."""
    data = tmp_path / "tars"
    write_dataset(data, [40, 40], payload=30)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["index", str(data), "--out", str(out)])
    assert result.exit_code == 0, result.output
    idx = out / (KEYS_NAME + IDX_SUFFIX)
    lines = idx.read_bytes().split(b"\n")[:-1]
    first, last = lines[0], lines[-1]
    if how == "end":
        lines[-1] = last[:-16] + b"%016x" % (1 << 40)
    elif how == "order":
        lines = [first[:-16] + b"%016x" % 5000, last[:-16] + b"%016x" % 100]
    else:
        lines[0] = first[:-16] + b"%016x" % 7
    idx.write_bytes(b"\n".join(lines) + b"\n")
    samples = ShardMap(out / INDEX_NAME, decode=False)
    error = ShardReadError if how == "end" else FormatError
    said = r"ends after \d+ of the \d+ bytes asked for" if how == "end" else "block offsets do not increase"
    with pytest.raises(error, match=said):
        samples.get("s001-00007")
    assert samples[47]["__key__"] == "s001-00007"  # reading by position does not need the key file
