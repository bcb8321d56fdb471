"""Deferred reads (streamer/chain/deferred.py): behind the shuffle buffer local shards are read by sample as
samples leave it. The stream must equal the front-to-back one sample for sample; the buffer must hold no
bytes; damage found late is skipped and counted as it would be early; states move between the two. These
samples are small, which by default are read as they enter: the tests ask for ``defer_reads=True``."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest
from torch.utils.data import DataLoader

from packer import PackOptions, pack
from shardstream.errors import ShardReadError
from shardstream.format import decode_offsets
from shardstream.indexer import IndexOptions, index_source
from streamer import ShardDataset
from tests.conftest import write_dataset
from tests.indexer.builders import gnu_tar_dataset, shardwriter_dataset

COUNTS = [30, 25, 41, 7, 33]


def _stream(source, **kwargs) -> list[tuple[str, dict[str, bytes]]]:
    """Every sample of an epoch, held until the end (a member must not change once handed out)."""
    samples = list(ShardDataset(source, decode=False, seed=3, **{"defer_reads": True, **kwargs}))
    return [(s["__key__"], {k: bytes(v) for k, v in s.items() if not k.startswith("__")}) for s in samples]


def _read_bytes() -> int:
    """Bytes this process has read through read/pread calls so far (Linux)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"buffer_size": 17, "initial": 5},
        {"fields": ["txt"]},
        {"zero_copy": True},
        {"rank": 1, "world_size": 2},
    ],
)
def test_the_stream_equals_the_front_to_back_one(tmp_path, options):
    index = write_dataset(tmp_path / "d", COUNTS, payload=300)
    deferred = _stream(index, **options)
    assert deferred == _stream(index, defer_reads=False, **options)
    assert len({key for key, _ in deferred}) == len(deferred) > 0


def test_more_shards_than_it_keeps_open(tmp_path):
    """40 shards of 3 samples in one 1,000-sample buffer: shards are closed and opened again."""
    index = write_dataset(tmp_path / "d", [3] * 40)
    deferred = _stream(index)
    assert deferred == _stream(index, defer_reads=False) and len(deferred) == 120


def test_two_workers_give_the_same_samples(tmp_path):
    index = write_dataset(tmp_path / "d", COUNTS)
    datasets = [ShardDataset(index, decode=False, seed=1, defer_reads=defer) for defer in (True, False)]
    loaders = [DataLoader(ds, batch_size=None, num_workers=2) for ds in datasets]
    deferred, read_in_order = ([(s["__key__"], s["txt"]) for s in loader] for loader in loaders)
    assert deferred == read_in_order and len(deferred) == sum(COUNTS)


def test_the_first_sample_reads_one_sample_not_a_buffer(tmp_path):
    index = write_dataset(tmp_path / "d", [400], payload=2000)  # 4.4 MB of samples, ~11 KB each
    shard_bytes = (tmp_path / "d" / "train-000000.tar").stat().st_size
    read = {}
    for defer in (True, False):
        before = _read_bytes()
        next(iter(ShardDataset(index, decode=False, buffer_size=400, defer_reads=defer)))
        read[defer] = _read_bytes() - before
    assert read[False] > shard_bytes * 0.9  # front to back: the whole buffer is read first
    assert read[True] < 1 << 20  # deferred: the index, the sidecar and one sample


def test_by_default_a_shard_of_small_samples_is_read_as_they_enter_and_one_of_large_samples_deferred(
    tmp_path,
):
    small = write_dataset(tmp_path / "small", [400], payload=2000)  # ~11 KB a sample
    raw = tmp_path / "raw"
    raw.mkdir()
    for i in range(100):
        (raw / f"k{i:03d}.bin").write_bytes(os.urandom(20_000 + 100 * i))  # 20-30 KB
    large = pack(raw, tmp_path / "large", PackOptions(prefix="train")).index
    read = {}
    for name, index in [("small", small), ("large", large)] * 2:  # the second round: modules are loaded
        before = _read_bytes()
        next(iter(ShardDataset(index, decode=False, buffer_size=400)))
        read[name] = _read_bytes() - before
    assert read["small"] > (tmp_path / "small" / "train-000000.tar").stat().st_size * 0.9  # all of it
    assert read["large"] < 1 << 20  # the index, the sidecar and one sample of a 2.5 MB shard
    outermost = {}
    for name, index in (("small", small), ("large", large)):
        dataset = ShardDataset(index, decode=False, buffer_size=400)
        iter(dataset)
        outermost[name] = type(dataset._chain[0]).__name__
    assert outermost == {"small": "ShuffleBuffer", "large": "Fetch"}  # no fetch stage to pay for small ones


def test_pax_long_names_and_directory_entries_take_the_general_reader(tmp_path):
    """Members the one-call scan declines (GNU long names, pax paths, directories) read the same."""
    root = tmp_path / "t"
    root.mkdir()
    for number, tar_format in enumerate((tarfile.GNU_FORMAT, tarfile.PAX_FORMAT)):
        with tarfile.open(root / f"long-{number}.tar", "w", format=tar_format) as tar:
            for i in range(12):
                key = f"{'deep/' * 25}n{number}-{i:03d}"  # 130 characters: past the 100 of a ustar name
                for ext, data in (("txt", b"x" * (i * 50)), ("cls", b"%d" % i)):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    gnu_tar_dataset(root, "dirs", 9)
    shardwriter_dataset(root, [8, 5])
    index_source(str(root), IndexOptions(out=tmp_path / "idx"))
    deferred = _stream(tmp_path / "idx", buffer_size=50)
    assert deferred == _stream(tmp_path / "idx", buffer_size=50, defer_reads=False)
    assert len(deferred) == 12 + 12 + 9 + 13


def _cut_after(index: Path, shard: int, sample: int) -> None:
    path = index.parent / f"train-{shard:06d}.tar"
    offsets = decode_offsets(Path(f"{path}.offsets").read_bytes())
    os.truncate(path, offsets[sample] + 700)  # in place: the open descriptor sees it


def test_a_shard_cut_short_mid_epoch_is_skipped_and_counted(tmp_path):
    index = write_dataset(tmp_path / "d", [40, 40], payload=300)
    ds = ShardDataset(
        index, decode=False, seed=2, on_error="skip", keep_length=False, buffer_size=80, defer_reads=True
    )
    stream = iter(ds)
    keys = [next(stream)["__key__"]]  # every id is in the buffer, both shards are open
    _cut_after(index, 1, 25)
    keys += [s["__key__"] for s in stream]
    lost = {f"s001-{i:05d}" for i in range(25, 40)} - set(keys[:1])
    assert set(keys) == ({f"s{n:03d}-{i:05d}" for n in (0, 1) for i in range(40)} - lost)
    assert ds.errors["samples_skipped"] == len(lost) and ds.errors["shards_failed"] == 1


def test_a_shard_cut_short_mid_epoch_raises_naming_it(tmp_path):
    index = write_dataset(tmp_path / "d", [40], payload=300)
    stream = iter(ShardDataset(index, decode=False, seed=2, buffer_size=40, defer_reads=True))
    next(stream)
    _cut_after(index, 0, 10)
    with pytest.raises(ShardReadError, match=r"train-000000\.tar at byte \d+: shard ends inside sample"):
        for _ in stream:
            pass


@pytest.mark.parametrize(("save_deferred", "load_deferred"), [(True, False), (False, True), (True, True)])
def test_a_state_moves_between_deferred_and_front_to_back(tmp_path, save_deferred, load_deferred):
    index = write_dataset(tmp_path / "d", COUNTS)
    whole = [s["__key__"] for s in ShardDataset(index, decode=False, seed=4, buffer_size=30)]
    first = ShardDataset(index, decode=False, seed=4, buffer_size=30, defer_reads=save_deferred)
    stream = iter(first)
    head = [next(stream)["__key__"] for _ in range(47)]
    state = first.state_dict()
    second = ShardDataset(index, decode=False, seed=4, buffer_size=30, defer_reads=load_deferred)
    second.load_state_dict(state)
    assert head + [s["__key__"] for s in second] == whole


def _image_dataset(root: Path, counts: list[int]) -> Path:
    """Shards of samples with a JPEG, an undecoded ``bin`` member and a label."""
    from PIL import Image

    from packer.sample import Sample
    from packer.shardwriter import TarShardWriter, encode_sample
    from shardstream.format import INDEX_NAME, DatasetIndex, shard_name, shard_pattern

    root.mkdir(parents=True)
    entries = []
    for number, count in enumerate(counts):
        writer = TarShardWriter(root / shard_name("img", number), max_size=None, max_count=None)
        for i in range(count):
            key = f"{number}-{i:03d}"
            buffer = io.BytesIO()
            Image.new("RGB", (24 + i % 5, 16), (i * 9 % 256, number * 40, 200)).save(buffer, "JPEG")
            members = (("jpg", buffer.getvalue()), ("bin", os.urandom(50 + i)), ("cls", b"%d" % i))
            chunks = encode_sample(Sample(key, key, members))
            writer.add(key, chunks, sum(len(c) for c in chunks))
        entries.append(writer.close())
    DatasetIndex(shard_pattern("img", len(counts)), entries).save(root / INDEX_NAME)
    return root / INDEX_NAME


@pytest.mark.parametrize("image", ["torch", "numpy", "pil"])
def test_decoded_samples_equal_the_front_to_back_ones(tmp_path, image):
    """Members read into the reused read buffer come out as bytes of their own: the next read does not
    overwrite them."""
    import numpy as np

    index = _image_dataset(tmp_path / "d", [20, 15])
    deferred, in_order = (
        list(ShardDataset(index, image=image, seed=1, buffer_size=10, defer_reads=d)) for d in (True, False)
    )
    assert [s["__key__"] for s in deferred] == [s["__key__"] for s in in_order] and len(deferred) == 35
    for a, b in zip(deferred, in_order, strict=True):
        assert type(a["bin"]) is bytes and a["bin"] == b["bin"] and a["cls"] == b["cls"]
        np.testing.assert_array_equal(np.asarray(a["jpg"]), np.asarray(b["jpg"]))


def test_a_users_decoder_gets_bytes(tmp_path):
    index = _image_dataset(tmp_path / "d", [12])
    seen = []

    def jpeg_length(data):
        seen.append(type(data))
        return len(data)

    samples = list(
        ShardDataset(index, decoders={"jpg": jpeg_length}, seed=2, buffer_size=5, defer_reads=True)
    )
    assert seen == [bytes] * 12 and all(s["jpg"] > 0 for s in samples)
    tagged = ShardDataset(
        index, decode=lambda s: {**s, "n": type(s["jpg"])}, seed=2, buffer_size=5, defer_reads=True
    )
    whole = list(tagged)
    assert {s["n"] for s in whole} == {bytes}


def test_a_restore_reads_nothing_again(tmp_path):
    """The saved buffer names samples; restored, it is refilled with their ids, not their bytes."""
    index = write_dataset(tmp_path / "d", [400], payload=2000)
    first = ShardDataset(index, decode=False, buffer_size=300, seed=6, defer_reads=True)
    stream = iter(first)
    head = [next(stream)["__key__"] for _ in range(20)]
    state = first.state_dict()
    whole = [s["__key__"] for s in ShardDataset(index, decode=False, buffer_size=300, seed=6)]
    second = ShardDataset(index, decode=False, buffer_size=300, seed=6, defer_reads=True)
    second.load_state_dict(state)
    before = _read_bytes()
    rest = iter(second)
    nxt = next(rest)["__key__"]
    assert _read_bytes() - before < 1 << 20  # 300 buffered samples of ~11 KB would be ~3.3 MB
    assert head + [nxt] + [s["__key__"] for s in rest] == whole
