"""s3:// datasets on a real S3 server (moto on 127.0.0.1): every sample once, by key, and clear errors.

Plain ``s3://`` URLs reach moto through the environment the ``s3_bucket`` fixture sets (the endpoint and
dummy credentials), in this process and in DataLoader workers alike. Nothing is mocked.
"""

from __future__ import annotations

import multiprocessing.forkserver
import os
import shutil
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import pytest
from torch.utils.data import DataLoader
from typer.testing import CliRunner

from packer import PackOptions, pack
from shardstream.errors import FormatError, ShardNotFoundError, ShardReadError
from shardstream.indexer import IndexOptions, index_source
from shardstream_cli import app
from shardstream_cli.demo.synth import make_corpus
from streamer import ShardDataset, ShardMap
from tests.conftest import expected_from_directory

if TYPE_CHECKING:
    from tests.servers.s3 import S3Bucket

pytest_plugins = ["tests.servers"]
pytest.importorskip("s3fs", reason="the S3 tests need s3fs and moto[server] (bash .ci/setup)")

SAMPLES = 12
INDEX = "shardstream-index.json"


class Local(NamedTuple):
    root: Path  # packed/ (the packer's output) and indexed/ (the same tars, `shardstream index`ed)
    samples: dict[str, dict[str, bytes]]  # what they hold, from the source files


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Local:
    """A small multimodal folder packed into 3 shards; the same tars indexed beside themselves too (an
    index with a key file, for lookup by key)."""
    root = tmp_path_factory.mktemp("s3data")
    corpus = make_corpus(root / "corpus", SAMPLES, video=False)
    pack(corpus.files_dir, root / "packed", PackOptions(max_count=4))
    (root / "indexed").mkdir()
    for tar in (root / "packed").glob("*.tar"):
        shutil.copy(tar, root / "indexed" / tar.name)
    index_source(str(root / "indexed"), IndexOptions())
    return Local(root, expected_from_directory(corpus.files_dir))


@pytest.fixture(scope="module")
def uploaded(s3_bucket: S3Bucket, local: Local) -> dict[str, dict[str, bytes]]:
    """Both datasets at s3://bucket/datasets/{packed,indexed}/; the samples they hold."""
    for name in ("packed", "indexed"):
        s3_bucket.upload(local.root / name, f"datasets/{name}")
    return local.samples


def _members(sample: dict) -> dict[str, bytes]:
    return {k: v for k, v in sample.items() if not k.startswith("__")}


def _assert_each_once(samples: list[dict], expected: dict[str, dict[str, bytes]]) -> None:
    keys = [s["__key__"] for s in samples]
    assert sorted(keys) == sorted(expected) and len(keys) == len(set(keys)) == SAMPLES
    assert all(_members(s) == expected[s["__key__"]] for s in samples)
    assert all(s["__url__"].startswith("s3://") for s in samples)


@pytest.mark.parametrize("shuffle", [False, True])
def test_every_sample_once_through_the_index_url(s3_bucket, uploaded, shuffle):
    url = s3_bucket.url(f"datasets/packed/{INDEX}")
    samples = list(ShardDataset(url, decode=False, shuffle=shuffle, seed=5))
    _assert_each_once(samples, uploaded)
    in_order = sorted(uploaded)  # the packer writes keys in sorted order
    assert ([s["__key__"] for s in samples] == in_order) is not shuffle


@pytest.mark.parametrize("context", ["fork", "forkserver"])
def test_two_dataloader_workers_read_every_sample_once(s3_bucket, uploaded, context):
    """Workers reach moto through the environment they inherit, a fresh interpreter (forkserver's) too."""
    dataset = ShardDataset(s3_bucket.url(f"datasets/indexed/{INDEX}"), decode=False, seed=1)
    if context == "forkserver":
        # The forkserver keeps the environment of its start, which an earlier test of the session may
        # have made before moto's settings existed: start a fresh one (what a new process would have).
        multiprocessing.forkserver._forkserver._stop()  # type: ignore[attr-defined]
    loader = DataLoader(dataset, batch_size=None, num_workers=2, multiprocessing_context=context)
    _assert_each_once(list(loader), uploaded)


def test_shardmap_reads_by_position_and_key_on_s3(s3_bucket, uploaded):
    samples = ShardMap(s3_bucket.url(f"datasets/indexed/{INDEX}"), decode=False)
    assert len(samples) == SAMPLES
    by_position = [samples[i] for i in range(SAMPLES)]
    _assert_each_once(by_position, uploaded)
    for key, members in uploaded.items():
        assert _members(samples.get(key)) == members
    with pytest.raises(KeyError):
        samples.get("part0/no-such-key")


def _no_secret(exc: BaseException) -> str:
    """The error's message, once checked that neither it nor its chain of causes shows the credentials."""
    shown = "".join(traceback.format_exception(exc))
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in shown and os.environ["AWS_ACCESS_KEY_ID"] not in shown
    return str(exc)


def test_missing_objects_and_buckets_are_clear_errors_without_secrets(s3_bucket, local):
    started = time.monotonic()
    for url in (s3_bucket.url(f"datasets/nothing-here/{INDEX}"), f"s3://no-such-bucket-x/d/{INDEX}"):
        with pytest.raises(FormatError, match="index not found") as caught:
            ShardDataset(url, decode=False)
        assert url in _no_secret(caught.value)
    # An index whose second shard is gone: that shard's URL, as a ShardNotFoundError.
    prefix = "datasets/lost-shard"
    s3_bucket.upload(local.root / "packed", prefix)
    s3_bucket.fs.rm(f"{s3_bucket.name}/{prefix}/train-000001.tar")
    with pytest.raises(ShardNotFoundError) as caught:
        list(ShardDataset(s3_bucket.url(f"{prefix}/{INDEX}"), decode=False, shuffle=False))
    assert s3_bucket.url(f"{prefix}/train-000001.tar") in _no_secret(caught.value)
    # A folder is no shard: s3fs would open it as 0 bytes, which would read as an empty dataset.
    with pytest.raises(ShardReadError, match="is a folder") as caught:
        list(ShardDataset(s3_bucket.url("datasets/packed/"), decode=False))
    _no_secret(caught.value)
    assert time.monotonic() - started < 10  # answers, not retries against a server that is not there


@pytest.mark.parametrize("folder", ["datasets/packed/", f"datasets/packed/{INDEX}"])
def test_cli_info_ls_and_stats_take_s3_urls(s3_bucket, uploaded, folder):
    runner = CliRunner()
    url = s3_bucket.url(folder)
    info = runner.invoke(app, ["info", url])
    assert info.exit_code == 0 and f"samples:  {SAMPLES}" in info.stdout
    listed = runner.invoke(app, ["ls", url])
    assert listed.exit_code == 0 and f"{SAMPLES} of {SAMPLES} samples shown" in listed.stdout
    stats = runner.invoke(app, ["stats", url, "--json"])
    assert stats.exit_code == 0 and f'"samples": {SAMPLES}' in stats.stdout
    missing = runner.invoke(app, ["info", s3_bucket.url(f"datasets/nothing-here/{INDEX}")])
    assert missing.exit_code == 1 and "index not found" in missing.output
