"""s3:// read natively through obstore against moto on 127.0.0.1: parallel parts in order, the ETag pinned,
clear errors without credentials. Nothing is mocked: real server, real requests, real DataLoader workers.
"""

from __future__ import annotations

import multiprocessing.forkserver
import os
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from torch.utils.data import DataLoader

from packer import PackOptions, pack
from shardstream.errors import ShardNotFoundError, ShardReadError
from shardstream.io.objstore import ObjectStream
from shardstream.io.objstoreoptions import ObjectStoreOptions
from shardstream.io.openers import OPENERS, OpenOptions, open_stream, read_range
from shardstream_cli.demo.synth import make_corpus
from streamer import ShardDataset
from tests.conftest import members_by_key

if TYPE_CHECKING:
    from tests.servers.s3 import S3Bucket

pytest_plugins = ["tests.servers"]
pytest.importorskip("obstore", reason="native s3:// needs obstore: pip install obstore")
pytest.importorskip("s3fs", reason="the S3 tests need s3fs and moto[server] (bash .ci/setup)")

INDEX = "shardstream-index.json"


def _pattern(size: int) -> bytes:
    """Bytes where every 4 KiB block differs: a part put in the wrong place shows."""
    block = 4096
    return b"".join(i.to_bytes(4, "big") * (block // 4) for i in range(size // block + 1))[:size]


def _no_secret(exc: BaseException) -> str:
    shown = "".join(traceback.format_exception(exc))
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in shown and os.environ["AWS_ACCESS_KEY_ID"] not in shown
    return str(exc)


def test_s3_is_read_through_obstore(s3_bucket: S3Bucket):
    assert OPENERS["s3"].__name__ == "_open_object"
    s3_bucket.fs.pipe(f"{s3_bucket.name}/small/a.bin", b"0123456789")
    with open_stream(s3_bucket.url("small/a.bin")) as stream:
        assert isinstance(stream, ObjectStream) and stream.read() == b"0123456789"
    assert read_range(s3_bucket.url("small/a.bin"), 3, 7) == b"3456"


def test_a_large_object_reads_back_byte_identical_in_parallel_parts(s3_bucket: S3Bucket):
    """40 MB in 1 MiB parts, 8 in flight: every byte in order (a part out of place would show)."""
    data = _pattern(40_000_000 + 123)
    s3_bucket.fs.pipe(f"{s3_bucket.name}/large/big.bin", data)
    options = ObjectStoreOptions(part_size="1MiB", parts_in_flight=8)
    started = time.monotonic()
    with ObjectStream(s3_bucket.url("large/big.bin"), 0, options) as stream:
        got = stream.read()
    seconds = time.monotonic() - started
    assert len(got) == len(data) and got == data
    print(f"obstore from moto: {len(data) / seconds / 1e6:.0f} MB/s")
    # From an offset inside a part, through the registry's options.
    offset = 5 * (1 << 20) + 17
    opening = OpenOptions(object_store=options)
    with open_stream(s3_bucket.url("large/big.bin"), offset, opening) as stream:
        got = b""
        while len(got) < 3 << 20:  # a raw stream's read may be short: at a part's end
            got += stream.read((3 << 20) - len(got))
        assert got == data[offset : offset + (3 << 20)]


def test_an_object_replaced_mid_read_is_an_error_never_spliced_bytes(s3_bucket: S3Bucket):
    part = 256 << 10
    old, new = _pattern(4 * part), bytes(reversed(_pattern(4 * part)))
    path = f"{s3_bucket.name}/replaced/shard.tar"
    s3_bucket.fs.pipe(path, old)
    options = ObjectStoreOptions(part_size=part, parts_in_flight=1, retries=0)
    with ObjectStream(s3_bucket.url("replaced/shard.tar"), 0, options) as stream:
        got = stream.read(part)  # part 1 taken: part 2 asked for, then the object replaced
        s3_bucket.fs.pipe(path, new)
        with pytest.raises(ShardReadError, match="changed while it was read") as caught:
            while chunk := stream.read(part):  # part 3 is asked for after the replacement
                got += chunk
    assert caught.value.offset is not None and caught.value.offset >= part  # part 2 may be either version
    assert s3_bucket.url("replaced/shard.tar") in _no_secret(caught.value)


def test_missing_bucket_and_object_fail_at_once_naming_the_url(s3_bucket: S3Bucket):
    started = time.monotonic()
    for url in ("s3://no-such-bucket-objstore/d/x.tar", s3_bucket.url("nothing/here.tar")):
        with pytest.raises(ShardNotFoundError, match="not found") as caught:
            ObjectStream(url)
        assert url in _no_secret(caught.value)
        with pytest.raises(ShardNotFoundError):
            read_range(url, 0, 10)
    with pytest.raises(ShardNotFoundError, match="is a folder"):
        ObjectStream(s3_bucket.url("nothing/"))
    assert time.monotonic() - started < 5  # no retries on a 404


def test_options_are_checked():
    with pytest.raises(ValueError, match="parts_in_flight"):
        ObjectStoreOptions(parts_in_flight=0)
    with pytest.raises(ValueError, match="part_size"):
        ObjectStoreOptions(part_size=0)
    assert ObjectStoreOptions(part_size="16MiB").part_size == 16 << 20
    assert "secret" not in repr(OpenOptions()).lower()


@pytest.fixture(scope="module")
def packed(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("objstore")
    corpus = make_corpus(root / "corpus", 12, video=False)
    pack(corpus.files_dir, root / "packed", PackOptions(max_count=4))
    return root / "packed"


def test_shards_from_s3_give_the_samples_from_disk_with_two_workers(s3_bucket: S3Bucket, packed: Path):
    """A forkserver's workers are fresh interpreters: they read their shards through obstore."""
    url = s3_bucket.upload(packed, "objstore/packed")
    on_disk = members_by_key(ShardDataset(str(packed / INDEX), decode=False, shuffle=False))
    multiprocessing.forkserver._forkserver._stop()  # type: ignore[attr-defined]
    dataset = ShardDataset(f"{url}/{INDEX}", decode=False, seed=3)
    loader = DataLoader(dataset, batch_size=None, num_workers=2, multiprocessing_context="forkserver")
    samples = list(loader)
    assert len(samples) == len(on_disk) == 12
    assert members_by_key(samples) == on_disk


def test_the_way_back_to_s3fs(s3_bucket: S3Bucket, packed: Path, monkeypatch):
    url = s3_bucket.upload(packed, "objstore/back")
    monkeypatch.setenv("SHARDSTREAM_S3_CLIENT", "s3fs")
    with open_stream(f"{url}/train-000000.tar") as stream:
        assert not isinstance(stream, ObjectStream)
    samples = list(ShardDataset(f"{url}/{INDEX}", decode=False, shuffle=False))
    local = ShardDataset(str(packed / INDEX), decode=False, shuffle=False)
    assert members_by_key(samples) == members_by_key(local)


def test_403_fails_at_once_naming_the_url_without_credentials(s3_bucket: S3Bucket, monkeypatch):
    """moto checks credentials against its IAM once told to: the dummy key is then refused with a 403."""
    settings = pytest.importorskip("moto.settings")
    s3_bucket.fs.pipe(f"{s3_bucket.name}/denied/a.tar", b"x" * 100)
    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # moto's server runs in this process
    started = time.monotonic()
    url = s3_bucket.url("denied/a.tar")
    for attempt in (lambda: ObjectStream(url), lambda: read_range(url, 0, 10)):
        with pytest.raises(ShardReadError, match="access denied") as caught:
            attempt()
        assert url in _no_secret(caught.value) and "AWS_SECRET_ACCESS_KEY" in str(caught.value)
    assert time.monotonic() - started < 5  # refused, not retried


def test_fork_started_workers_after_obstore_ran_here_still_read_every_sample(
    s3_bucket: S3Bucket, packed: Path
):
    """obstore's runtime does not survive fork(): workers forked after it ran here read through s3fs."""
    url = s3_bucket.upload(packed, "objstore/forked")
    assert read_range(f"{url}/train-000000.tar", 0, 512)  # obstore has run in this process
    dataset = ShardDataset(f"{url}/{INDEX}", decode=False, seed=4)
    loader = DataLoader(dataset, batch_size=None, num_workers=2, multiprocessing_context="fork")
    on_disk = members_by_key(ShardDataset(str(packed / INDEX), decode=False, shuffle=False))
    samples = list(loader)
    assert len(samples) == 12 and members_by_key(samples) == on_disk
