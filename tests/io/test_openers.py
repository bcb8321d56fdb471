"""Sources other than local paths and HTTP: file://, pipe:CMD, any fsspec URL, and clear errors."""

from __future__ import annotations

import sys

import pytest

from shardstream.errors import ShardReadError
from streamer import ShardDataset
from tests.conftest import write_dataset


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return write_dataset(tmp_path_factory.mktemp("open"), [7, 11, 4])


def _keys(dataset):
    return [s["__key__"] for s in dataset]


def test_file_urls_and_pipes_give_the_local_stream(index):
    root = index.parent
    names = "train-{000000..000002}.tar"
    local = _keys(ShardDataset(f"{root}/{names}", decode=False, shuffle=False))
    via_file = _keys(ShardDataset(f"file://{root}/{names}", decode=False, shuffle=False))
    via_pipe = _keys(ShardDataset(f"pipe:cat {root}/{names}", decode=False, shuffle=False))
    assert local == via_file == via_pipe and len(local) == 22


def test_fsspec_urls_read_like_local_ones(index):
    fsspec = pytest.importorskip("fsspec")
    memory = fsspec.filesystem("memory")
    for path in index.parent.iterdir():
        memory.pipe(f"/openers/{path.name}", path.read_bytes())
    local = _keys(ShardDataset(index, decode=False, seed=2))
    assert _keys(ShardDataset("memory:///openers/shardstream-index.json", decode=False, seed=2)) == local


def test_a_scheme_without_its_backend_names_the_package(index, monkeypatch):
    registry = pytest.importorskip("fsspec.registry")
    monkeypatch.setitem(sys.modules, "s3fs", None)  # as if s3fs were not installed (the test extras have it)
    monkeypatch.delitem(registry._registry, "s3", raising=False)  # nor loaded by an earlier test
    monkeypatch.setenv("SHARDSTREAM_S3_CLIENT", "s3fs")  # s3:// through fsspec, not natively (obstore)
    with pytest.raises(ShardReadError, match=r"s3://.*(s3fs|fsspec)"):
        list(ShardDataset("s3://bucket/train-{0..1}.tar", decode=False))


def test_a_cached_shard_must_match_the_index_sha256(index, tmp_path):
    fsspec = pytest.importorskip("fsspec")
    memory = fsspec.filesystem("memory")
    for path in index.parent.iterdir():
        data = path.read_bytes()
        if path.name == "train-000001.tar":
            data = data[:600] + bytes([data[600] ^ 1]) + data[601:]  # a flipped bit in a member's data
        memory.pipe(f"/sha/{path.name}", data)
    ds = ShardDataset("memory:///sha/shardstream-index.json", decode=False, cache_dir=tmp_path / "c")
    with pytest.raises(ShardReadError, match=r"train-000001\.tar.*sha256"):
        list(ds)
