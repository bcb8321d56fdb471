"""A sidecar that no longer matches its shard (issue 32, item 5): a shard rewritten after it was indexed,
its old offsets sidecar kept. Every reader that trusts the sidecar (front to back with its ends, deferred
reads, zero-copy, ``ShardMap``) either names the shard and says to index it again, or hands out exactly the
samples a strict reading of the new bytes gives; never a partial, merged or split sample. What is checked
costs no re-read: the index's shard size before the sidecar is trusted (one stat), and per sample that it
holds one key, ends exactly where the sidecar says, and that the next header starts another key.

Also: a ``Mixture`` source given as an index written by ``shardstream index --out DIR`` reads its sidecars
from ``DIR/sidecars/``, not from beside the shards."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import warnings
from pathlib import Path

import pytest

from shardstream.errors import ShardReadError, StaleSidecarError
from shardstream.format import INDEX_NAME, decode_offsets, offsets_name
from streamer import Mixture, ShardDataset, ShardMap
from tests.conftest import write_dataset

pytestmark = pytest.mark.timeout(60)

STALE = r"train-000001\.tar.*run `shardstream index` again"
MODES = {
    "front-to-back": dict(defer_reads=False),
    "deferred": dict(defer_reads=True),
    "zero-copy": dict(defer_reads=True, zero_copy=True),
}


def _members(path: Path) -> list[tuple[str, bytes]]:
    with tarfile.open(path) as tar:
        return [(m.name, tar.extractfile(m).read()) for m in tar if m.isfile()]  # type: ignore[union-attr]


def _write(path: Path, members: list[tuple[str, bytes]], size: int | None = None) -> None:
    """A tar of ``members``; ``size``: cut to (or padded to) that many bytes, as another writer with less
    end padding than tarfile's 10 KiB records would leave it, so the index's size check cannot tell."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    data = buffer.getvalue()
    if size is not None:
        data = data[:size] + bytes(max(0, size - len(data)))
    path.write_bytes(data)


def _strict(path: Path) -> dict[str, dict[str, bytes]]:
    """The new bytes read strictly: consecutive members of one key are one sample."""
    samples: dict[str, dict[str, bytes]] = {}
    for name, data in _members(path):
        key, ext = name.split(".", 1)
        samples.setdefault(key, {})[ext] = data
    return samples


def _rewrite(shard: Path, how: str) -> None:
    """Rewrite ``shard`` in place as someone might after indexing it."""
    members = _members(shard)
    if how == "renamed":  # sample 2's members take sample 1's key: one key over two of the sidecar's spans
        key1, key2 = members[2][0].split(".")[0], members[4][0].split(".")[0]
        members = [(name.replace(key2, key1), data) for name, data in members]
    elif how == "swapped-sizes":  # the same size in all, but samples 0 and 7 trade texts of 1 and 2 blocks
        (n0, d0), (n7, d7) = members[0], members[14]
        assert len(d0) <= 512 < len(d7)
        members[0], members[14] = (n0, d7), (n7, d0)
    elif how == "shifted":  # one small member in front: every span starts 512 or 1024 bytes early
        members.insert(0, ("aaaa.txt", b"x"))
    _write(shard, members, None if how == "shifted" else shard.stat().st_size)


def _stale(tmp_path: Path, how: str) -> tuple[Path, Path]:
    index = write_dataset(tmp_path / "d", [8, 8, 8], payload=300)
    shard = index.parent / "train-000001.tar"
    _rewrite(shard, how)
    return index, shard


HOWS = ["renamed", "swapped-sizes", "shifted"]


def _assert_strict(samples: list[dict], shard: Path) -> None:
    """Every sample of ``shard`` handed out is one of a strict reading of its bytes, whole."""
    strict = _strict(shard)
    for sample in samples:
        if sample["__url__"].endswith(shard.name):
            members = {k: bytes(v) for k, v in sample.items() if not k.startswith("__")}
            assert strict.get(sample["__key__"]) == members, sample["__key__"]


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
@pytest.mark.parametrize("indexed", [True, False], ids=["index", "sidecars-only"])
def test_a_stale_sidecar_is_named_or_read_right_never_a_wrong_sample(tmp_path, how, mode, indexed):
    index, shard = _stale(tmp_path, how)
    source = index if indexed else str(index.parent / "train-{000000..000002}.tar")
    try:
        samples = list(ShardDataset(source, decode=False, seed=1, **mode))
    except ShardReadError as exc:
        assert "run `shardstream index` again" in str(exc) or "corrupt tar header" in str(exc), exc
        assert "train-000001.tar" in str(exc)
    else:
        _assert_strict(samples, shard)
    skipping = ShardDataset(source, decode=False, seed=1, on_error="skip", keep_length=False, **mode)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        samples = list(skipping)
    _assert_strict(samples, shard)
    keys = [s["__key__"] for s in samples]
    assert len(keys) == len(set(keys)), "a sample split in two"
    # Something says so: a count of what was lost, or (a shard of another size than its index gives,
    # read by its own headers instead) a warning to index it again.
    warned = any("run `shardstream index` again" in str(w.message) for w in said)
    assert skipping.errors["samples_skipped"] + skipping.errors["shards_failed"] > 0 or warned


@pytest.mark.parametrize("how", HOWS)
def test_random_access_over_a_stale_sidecar_is_named_or_right(tmp_path, how):
    index, shard = _stale(tmp_path, how)
    samples = ShardMap(index, decode=False)
    strict, wrong = _strict(shard), []
    for i in range(8, 16):
        try:
            sample = samples[i]
        except ShardReadError as exc:
            assert "train-000001.tar" in str(exc)
            continue
        members = {k: bytes(v) for k, v in sample.items() if not k.startswith("__")}
        if strict.get(sample["__key__"]) != members:
            wrong.append(sample["__key__"])
    assert not wrong


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_a_shard_of_another_size_than_indexed_is_read_by_its_headers_not_its_sidecar(tmp_path, mode):
    index, shard = _stale(tmp_path, "shifted")
    said = r"train-000001\.tar: the shard is \d+ bytes, its index says \d+.*sidecar is not used"
    with pytest.warns(UserWarning, match=said):
        samples = list(ShardDataset(index, decode=False, seed=1, **mode))
    _assert_strict(samples, shard)
    assert sum(s["__url__"].endswith(shard.name) for s in samples) == 8  # as many as the index plans


def test_a_split_sample_is_refused_by_the_header_after_it(tmp_path):
    """Sample 2 renamed to sample 1's key: the sidecar's span for sample 1 holds one key and ends right,
    but the next header goes on with that key. Deferred reads check that header (no re-read)."""
    index, _ = _stale(tmp_path, "renamed")
    reads = ShardDataset(
        index, decode=False, shuffle=False, defer_reads=True, on_error="skip", keep_length=False
    )
    keys = [s["__key__"] for s in reads]
    assert len(keys) == len(set(keys)) and reads.errors["samples_skipped"] >= 1


def test_a_mixture_source_indexed_with_out_reads_its_sidecars_there(tmp_path):
    data = tmp_path / "tars"
    write_dataset(data, [6, 6], payload=300)
    for leftover in [*data.glob("*.offsets"), *data.glob("*.json"), *data.glob("*.keys*")]:
        leftover.unlink()
    out = tmp_path / "out"
    command = [sys.executable, "-m", "shardstream_cli", "index", str(data), "--out", str(out), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    sidecars = sorted((out / "sidecars").glob("*"))
    assert len(sidecars) == 2 and not list(data.glob("*.offsets"))
    # A sidecar there that cannot be right: the mixture must read it (and say so), not read around it.
    sidecars[1].write_bytes(b"not-a-sidecar")
    mixture = Mixture([{"path": str(out / INDEX_NAME), "weight": 1, "decode": False}], epoch_size=12, seed=1)
    with pytest.raises(ShardReadError, match=r"sidecars/.*not a multiple of 8"):
        list(mixture)
    assert json.loads((out / INDEX_NAME).read_text())["totals"]["samples"] == 12


def test_reading_from_a_sidecar_still_costs_no_extra_error_on_good_shards(tmp_path):
    index = write_dataset(tmp_path / "d", [6, 6, 6], payload=300)
    for mode in MODES.values():
        keys = [s["__key__"] for s in ShardDataset(index, decode=False, seed=1, **mode)]
        assert sorted(keys) == sorted(f"s{n:03d}-{i:05d}" for n in range(3) for i in range(6))
    assert Path(offsets_name(str(index.parent / "train-000001.tar"))).exists()


def _swallow_sample_1(shard: Path) -> None:
    """Sample 0's first member now declares a size that runs over sample 1, in place (same file size)."""
    offsets = list(decode_offsets(Path(offsets_name(str(shard))).read_bytes()))
    data = bytearray(shard.read_bytes())
    header = data[offsets[0] : offsets[0] + 512]
    header[124:136] = b"%011o\0" % (offsets[2] - offsets[0] - 512)
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    data[offsets[0] : offsets[0] + 512] = header
    shard.write_bytes(bytes(data))
    assert "s001-00001" not in _strict(shard)


def test_after_a_stale_span_no_later_offset_of_that_shard_is_trusted(tmp_path):
    """Sample 0's text now declares a size that runs over sample 1 (same file size: the index's size check
    cannot see it). Read in order, sample 0's span fails its end check; sample 1's span would still read
    as a whole sample at its sidecar offset, though a reading from the start steps over it as data: the
    rest of the segment is lost, not read on from the next offset."""
    index = write_dataset(tmp_path / "d", [8, 8, 8], payload=30)
    _swallow_sample_1(index.parent / "train-000001.tar")
    reads = ShardDataset(
        index, decode=False, shuffle=False, defer_reads=True, on_error="skip", keep_length=False
    )
    keys = [s["__key__"] for s in reads]
    assert not [k for k in keys if k.startswith("s001-")], keys
    assert reads.errors["shards_failed"] == 1 and reads.errors["samples_skipped"] == 8


def test_deferred_reads_trust_no_offset_of_a_shard_after_one_stale_span(tmp_path):
    """The same shard read one sample at a time, as behind a shuffle buffer: sample 0 fails its end
    check, and from then on sample 1, though whole at its offset, is refused as part of a stale shard."""
    from streamer.chain.deferred import DeferredReads
    from streamer.chain.opener import ShardOpener
    from streamer.placement.shards import ShardList

    index = write_dataset(tmp_path / "d", [8, 8, 8], payload=30)
    shard = index.parent / "train-000001.tar"
    _swallow_sample_1(shard)
    reads = DeferredReads(ShardOpener(ShardList.from_source(index)), small=0)
    with pytest.raises(StaleSidecarError, match=r"member 's001-00000\.txt' running past it"):
        reads.read(1, 0)
    assert reads.newly_cut(1)  # counted as a failed shard, once
    with pytest.raises(ShardReadError, match="no longer matches its offsets sidecar"):
        reads.read(1, 1)
    assert reads.read(2, 1)["__key__"] == "s002-00001"  # other shards read on
