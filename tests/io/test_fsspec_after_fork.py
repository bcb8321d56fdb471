"""After a DataLoader with fork-started workers read s3:// metadata through s3fs, the main process reads on
at once: the workers must not close the connection pool they inherited (its sockets are the parent's)."""

from __future__ import annotations

import time

import pytest
from torch.utils.data import DataLoader

from packer import PackOptions, pack
from shardstream_cli.demo.synth import make_corpus
from streamer import ShardDataset
from tests.servers.shaped_s3 import ShapedS3Server

pytest_plugins = ["tests.servers.shaped_fixtures"]
pytest.importorskip("s3fs", reason="the main process reads the index through s3fs when it is installed")


def test_the_main_process_reads_on_at_once_after_fork_started_workers(pointed_s3: ShapedS3Server, tmp_path):
    corpus = make_corpus(tmp_path / "corpus", 12, video=False).files_dir
    pack(corpus, pointed_s3.root / "packed", PackOptions(max_count=3))
    url = f"s3://{pointed_s3.bucket}/packed/shardstream-index.json"
    loader = DataLoader(ShardDataset(url, decode=False), batch_size=None, num_workers=2)
    assert sum(1 for _ in loader) == 12  # the workers fetch sidecars through s3fs, forked with its pool
    pointed_s3.reset_log()
    started = time.monotonic()
    again = ShardDataset(url, decode=False)  # the index again, on the parent's pooled connection
    assert time.monotonic() - started < 5, "the parent waited out a connection its workers closed"
    assert again.shards.counts.sum() == 12
    assert [r.path.rsplit("/", 1)[-1] for r in pointed_s3.requests] == ["shardstream-index.json"]
