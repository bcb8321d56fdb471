"""No thread of ours outlives its work in the process that forks DataLoader workers (fork + threads deadlock).

Python 3.12+ warns when a multi-threaded process forks. The threads a training script still has there are
not ours (numpy's OpenBLAS pool, torch's intra-op pool): these tests pin down that prefetch, the cache and
the HTTP pools add none once their reading is over, and none at all before the first read.
"""

from __future__ import annotations

import threading
import time

import pytest
from torch.utils.data import DataLoader

from shardstream.io.http import HttpOptions
from streamer import ShardDataset
from tests.conftest import write_dataset

pytest_plugins = ["tests.servers"]

FAST = HttpOptions(connect_timeout=2, read_timeout=2, retries=1, backoff=0.01, max_backoff=0.05)
COUNTS = [900, 1000, 800, 1100]  # ~2 MB shards: more than the 1 MiB read-ahead budget below holds
AHEAD = {"prefetch": 2, "prefetch_bytes": 1 << 20}  # a read-ahead blocks on its full queue mid-shard


def _ours(before: set[int]) -> list[str]:
    """Threads started since ``before`` that are still running, given up to 3 s to finish."""
    deadline = time.monotonic() + 3
    while True:
        extra = [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()]
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.02)


@pytest.fixture
def remote(nginx_server):
    write_dataset(nginx_server.root / "d", COUNTS, payload=400)
    return f"{nginx_server.url}/d/shardstream-index.json"


def test_building_and_measuring_a_remote_dataset_starts_no_thread(remote, tmp_path):
    before = {t.ident for t in threading.enumerate()}
    ds = ShardDataset(remote, decode=False, **AHEAD, cache_dir=tmp_path / "cache", http=FAST)
    assert len(ds) == sum(COUNTS)
    assert [t.name for t in threading.enumerate() if t.ident not in before] == []


@pytest.mark.parametrize("cache", [False, True])
def test_read_ahead_threads_end_with_the_epoch_and_with_an_abandoned_iterator(remote, tmp_path, cache):
    before = {t.ident for t in threading.enumerate()}
    ds = ShardDataset(
        remote,
        decode=False,
        **AHEAD,
        http=FAST,
        buffer_size=4,
        cache_dir=tmp_path / "cache" if cache else None,
    )
    samples = iter(ds)
    next(samples)  # mid-shard: the next shards are being read ahead
    del samples
    assert _ours(before) == []
    assert sum(1 for _ in ds) == sum(COUNTS)
    assert _ours(before) == []


def test_a_main_process_that_read_first_forks_workers_without_threads_of_ours(remote):
    """The common notebook order: peek at a sample in the main process, then train with workers."""
    ds = ShardDataset(remote, decode=False, **AHEAD, http=FAST, buffer_size=4)
    before = {t.ident for t in threading.enumerate()}
    first = next(iter(ds))
    assert _ours(before) == []  # checked before the fork below
    loader = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork")
    keys = [s["__key__"] for s in loader]
    assert first["__key__"] in keys and len(keys) == len(set(keys)) == sum(COUNTS)


def test_packing_through_the_cli_leaves_no_thread(tmp_path):
    """The pack command's progress bar starts no monitor thread that would outlive it (tqdm's does)."""
    from typer.testing import CliRunner

    from shardstream_cli import app

    source = tmp_path / "src"
    source.mkdir()
    for i in range(5):
        (source / f"{i:03d}.txt").write_text(f"sample {i}")
    before = {t.ident for t in threading.enumerate()}
    result = CliRunner().invoke(app, ["pack", str(source), str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert [t.name for t in threading.enumerate() if t.ident not in before] == []
