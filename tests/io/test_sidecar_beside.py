"""A remote shard read from its start asks for its offsets sidecar and its first bytes at once
(``streamer/chain/sidecar.py``): the two requests overlap at the shaped S3 server, so the first sample
waits one round trip, not two; a sidecar that fails still fails the read, naming it. Nothing mocked."""

from __future__ import annotations

from pathlib import Path

import pytest

from packer import PackOptions, pack
from shardstream.errors import ShardReadError
from shardstream_cli.demo.synth import make_corpus
from streamer import ShardDataset
from tests.servers.shaped_s3 import ShapedS3Server

pytest_plugins = ["tests.servers.shaped_fixtures"]
pytest.importorskip("obstore", reason="native s3:// needs obstore: pip install obstore")

INDEX = "shardstream-index.json"
TTFB = 0.25  # seconds before every answer: requests sent one after the other cannot overlap


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("beside") / "corpus", 8, video=False).files_dir


@pytest.fixture
def served(pointed_s3: ShapedS3Server, corpus: Path, tmp_path: Path, monkeypatch) -> ShapedS3Server:
    pack(corpus, pointed_s3.root / "packed", PackOptions(max_count=4))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("SHARDSTREAM_CACHE", str(tmp_path / "node-cache"))
    return pointed_s3


def _first_shard_requests(srv: ShapedS3Server) -> tuple:
    tars = [r for r in srv.requests if r.path.endswith(".tar")]
    first = tars[0].path.removesuffix(".tar")
    sidecar = [r for r in srv.requests if r.path.startswith(first) and r.path.endswith(".offsets")]
    return tars[0], sidecar[0]


def test_the_first_shards_sidecar_and_bytes_are_asked_for_at_once(served):
    srv = served
    url = f"s3://{srv.bucket}/packed/{INDEX}"
    dataset = ShardDataset(url, decode=False, shuffle=False, prefetch=0)
    srv.reset_log()
    srv.ttfb = TTFB
    first = next(iter(dataset))
    assert first["__key__"]
    tar, sidecar = _first_shard_requests(srv)
    # Both were sent before either was answered: they overlap, each waiting its TTFB at the same time.
    assert tar.began < sidecar.ended and sidecar.began < tar.ended, (tar, sidecar)
    srv.ttfb = 0
    keys = [s["__key__"] for s in ShardDataset(url, decode=False, shuffle=False)]
    assert first["__key__"] == keys[0] and len(keys) == len(set(keys)) == 8


def test_a_shard_read_ahead_asks_for_both_at_once_too(served):
    srv = served
    url = f"s3://{srv.bucket}/packed/{INDEX}"
    samples = iter(ShardDataset(url, decode=False, shuffle=False, prefetch=1))
    srv.reset_log()
    srv.ttfb = TTFB
    keys = [s["__key__"] for s in samples]
    assert len(keys) == 8
    tars = sorted((r for r in srv.requests if r.path.endswith(".tar")), key=lambda r: r.began)
    second = tars[-1].path.removesuffix(".tar")  # the shard the read-ahead opened
    sidecar = next(r for r in srv.requests if r.path.startswith(second) and r.path.endswith(".offsets"))
    first_get = next(r for r in tars if r.path.startswith(second))
    assert first_get.began < sidecar.ended and sidecar.began < first_get.ended


def test_a_sidecar_that_fails_fails_the_read_naming_it(served):
    srv = served
    url = f"s3://{srv.bucket}/packed/{INDEX}"
    dataset = ShardDataset(url, decode=False, shuffle=False, prefetch=0)
    shard = next(p for p in sorted((srv.root / "packed").iterdir()) if p.name.endswith(".tar"))
    srv.forbid(f"packed/{shard.name}.offsets")
    with pytest.raises(ShardReadError, match="offsets"):
        next(iter(dataset))


def test_a_shard_whose_first_sample_is_not_at_byte_0_opens_again_there(pointed_s3, tmp_path, monkeypatch):
    """A tar made elsewhere may lead with a member no sample holds (a directory): its sidecar's first offset
    is past byte 0, and the stream opened at 0 while the sidecar came is opened again there."""
    import io
    import subprocess
    import sys
    import tarfile

    srv = pointed_s3
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("SHARDSTREAM_CACHE", str(tmp_path / "node-cache"))
    folder = srv.root / "lead"
    folder.mkdir()
    with tarfile.open(folder / "lead-000000.tar", "w", format=tarfile.USTAR_FORMAT) as tar:
        meta = tarfile.TarInfo("meta")
        meta.type = tarfile.DIRTYPE
        tar.addfile(meta)
        for i in range(3):
            for ext, data in (("txt", b"hello %d" % i), ("cls", b"%d" % i)):
                info = tarfile.TarInfo(f"s{i}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    subprocess.run(
        [sys.executable, "-m", "shardstream_cli", "index", str(folder)], check=True, capture_output=True
    )
    assert (folder / "lead-000000.tar.offsets").read_bytes()  # its first offset is 512: checked below
    srv.reset_log()
    samples = list(ShardDataset(f"s3://{srv.bucket}/lead/{INDEX}", decode=False, shuffle=False, prefetch=0))
    assert [(s["__key__"], s["txt"]) for s in samples] == [(f"s{i}", b"hello %d" % i) for i in range(3)]
    starts = sorted(int(r.range.removeprefix("bytes=").split("-")[0]) for r in srv.requests if r.range)
    assert 512 in starts and 0 in starts  # opened at 0 beside the sidecar, then again where it said
