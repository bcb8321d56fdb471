"""The local shard cache: hits and misses, verification, LRU eviction, crashes and many processes at once."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import pickle
import signal
import tempfile
import time
import warnings
from collections import OrderedDict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardstream.errors import ShardNotFoundError, ShardReadError
from shardstream.io.cache import STALE_TEMP_AGE, ShardCache


def content(url: str, size: int | None = None) -> bytes:
    """Bytes that only this URL has, so a mix-up between two URLs cannot go unnoticed."""
    seed = hashlib.sha256(url.encode()).digest()
    if size is None:
        size = 1000 + int.from_bytes(seed[:2], "little") % 4000
    return (seed * (size // len(seed) + 1))[:size]


class Fetcher:
    """A fetch function that counts its calls and writes in pieces, like a download."""

    def __init__(self, sizes: dict[str, int] | None = None) -> None:
        self.calls: list[str] = []
        self.sizes = sizes or {}

    def __call__(self, url: str):
        def fetch(handle):
            self.calls.append(url)
            data = content(url, self.sizes.get(url))
            for start in range(0, len(data), 700):
                handle.write(data[start : start + 700])

        return fetch


def leftovers(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.startswith("."))


def test_miss_then_hit_fetches_once(tmp_path):
    cache, fetcher, url = ShardCache(tmp_path / "c"), Fetcher(), "https://host/data/train-000001.tar"
    assert not cache.contains(url)
    first = cache.get(url, fetcher(url))
    second = cache.get(url, fetcher(url))
    assert first == second == cache.path_for(url)
    assert first.read_bytes() == content(url)
    assert fetcher.calls == [url]
    assert cache.contains(url) and cache.total_bytes() == len(content(url))
    assert first.name.endswith("-train-000001.tar") and leftovers(tmp_path / "c") == []


def test_hit_marks_recently_used(tmp_path):
    cache, fetcher, url = ShardCache(tmp_path), Fetcher(), "http://h/a.tar"
    path = cache.get(url, fetcher(url))
    os.utime(path, (1, 1))
    cache.get(url, fetcher(url))
    assert path.stat().st_mtime > time.time() - 60


def test_same_basename_on_different_hosts_does_not_collide(tmp_path):
    cache, fetcher = ShardCache(tmp_path), Fetcher()
    urls = [
        "https://a.example/x/train-000001.tar",
        "https://b.example/x/train-000001.tar",
        "https://a.example/y/train-000001.tar",
        "https://a.example/x/train-000001.tar?version=2",
        "pipe:curl -s https://a.example/x/train-000001.tar",
    ]
    paths = [cache.path_for(url) for url in urls]
    assert len(set(paths)) == len(urls)
    assert all(path.name.endswith("train-000001.tar") and path.parent == tmp_path for path in paths)
    for url in urls:
        cache.get(url, fetcher(url))
    assert all(cache.path_for(url).read_bytes() == content(url) for url in urls)
    assert cache.path_for("https://h/") != cache.path_for("https://g/")  # no basename at all


def test_verified_sha256_and_size_pass(tmp_path):
    cache, fetcher, url = ShardCache(tmp_path), Fetcher(), "http://h/a.tar"
    data = content(url)
    sha = hashlib.sha256(data).hexdigest().upper()  # hex digits in either case
    assert cache.get(url, fetcher(url), sha256=sha, size=len(data)).read_bytes() == data


@pytest.mark.parametrize("what", ["sha256", "size"])
def test_mismatch_raises_and_leaves_nothing(tmp_path, what):
    cache, fetcher, url = ShardCache(tmp_path), Fetcher(), "http://h/a.tar"
    data = content(url)
    expected = {"sha256": hashlib.sha256(b"other").hexdigest(), "size": len(data) + 1}[what]
    got = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}[what]
    with pytest.raises(ShardReadError, match=f"{what} mismatch") as info:
        cache.get(url, fetcher(url), **{what: expected})
    assert info.value.url == url and str(expected) in str(info.value) and str(got) in str(info.value)
    assert os.listdir(tmp_path) == [] and not cache.contains(url)


def test_cached_file_of_the_wrong_size_is_fetched_again(tmp_path):
    cache, fetcher, url = ShardCache(tmp_path), Fetcher(), "http://h/a.tar"
    cache.get(url, fetcher(url))
    fetcher.sizes[url] = 123  # the remote object changed; its index says so
    assert cache.get(url, fetcher(url), size=123).read_bytes() == content(url, 123)
    assert len(fetcher.calls) == 2


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (RuntimeError("boom"), RuntimeError),
        (ConnectionResetError("reset"), ShardReadError),
        (FileNotFoundError("gone"), ShardNotFoundError),
    ],
)
def test_failing_fetch_leaves_no_file(tmp_path, error, expected):
    cache, url = ShardCache(tmp_path), "http://h/a.tar"

    def fetch(handle):
        handle.write(b"half a shard")
        raise error

    with pytest.raises(expected) as info:
        cache.get(url, fetch)
    if issubclass(expected, ShardReadError):  # I/O errors are wrapped, naming the URL, with the cause kept
        assert info.value.url == url and info.value.__cause__ is error
    assert os.listdir(tmp_path) == []


def test_lru_eviction_order(tmp_path):
    urls = [f"http://h/{name}.tar" for name in "abcd"]
    fetcher = Fetcher(dict.fromkeys(urls, 100))
    cache = ShardCache(tmp_path, cache_size=300)
    for url in urls[:3]:
        cache.get(url, fetcher(url))
    cache.get(urls[0], fetcher(urls[0]))  # a is now the most recently used; b the least
    cache.get(urls[3], fetcher(urls[3]))
    assert [cache.contains(url) for url in urls] == [True, False, True, True]
    assert cache.total_bytes() == 300


def test_size_limit_holds_after_many_inserts(tmp_path):
    cache, fetcher, limit = ShardCache(tmp_path, cache_size=20_000), Fetcher(), 20_000
    for i in range(60):
        url = f"http://h/{i % 45}.tar"
        assert cache.get(url, fetcher(url)).read_bytes() == content(url)
        assert cache.total_bytes() <= limit
    assert cache.evict() == 0 and leftovers(tmp_path) == []


def test_object_larger_than_the_limit_is_returned_with_a_warning(tmp_path):
    small, big = "http://h/small.tar", "http://h/big.tar"
    fetcher = Fetcher({small: 50, big: 500})
    cache = ShardCache(tmp_path, cache_size=100)
    cache.get(small, fetcher(small))
    with pytest.warns(UserWarning, match="cache is too small"):
        path = cache.get(big, fetcher(big))
    assert path.read_bytes() == content(big, 500) and not cache.contains(small)
    cache.get(small, fetcher(small))
    assert not cache.contains(big) and cache.total_bytes() == 50


def test_open_handle_outlives_eviction(tmp_path):
    urls = [f"http://h/{i}.tar" for i in range(4)]
    cache, fetcher = ShardCache(tmp_path, cache_size=100), Fetcher(dict.fromkeys(urls, 100))
    with cache.open(urls[0], fetcher(urls[0])) as first:  # a miss: the handle is the published file
        for url in urls[1:]:
            cache.get(url, fetcher(url))
        assert not cache.contains(urls[0]) and first.read() == content(urls[0], 100)
    with cache.open(urls[-1], fetcher(urls[-1])) as hit:
        assert hit.read() == content(urls[-1], 100)
    assert len(fetcher.calls) == 4


def test_stale_temp_files_are_ignored_then_cleaned(tmp_path):
    cache = ShardCache(tmp_path)  # unbounded: eviction still cleans up after crashes
    name = cache.path_for("http://h/a.tar").name
    old, fresh = tmp_path / f".{name}.4242.abcdefgh.tmp", tmp_path / f".{name}.4243.abcdefgh.tmp"
    old.write_bytes(b"x" * 10)
    fresh.write_bytes(b"y" * 20)
    past = time.time() - STALE_TEMP_AGE - 60
    os.utime(old, (past, past))
    assert not cache.contains("http://h/a.tar") and cache.total_bytes() == 0
    assert cache.evict() == 10
    assert leftovers(tmp_path) == [fresh.name]  # may belong to a fetch still running


def _crash_mid_fetch(cache: ShardCache, url: str, started) -> None:
    def fetch(handle):
        handle.write(b"partial")
        handle.flush()
        started.set()
        time.sleep(60)

    cache.get(url, fetch)


def test_fetcher_killed_mid_write_leaves_only_an_ignored_temp_file(tmp_path):
    cache, url, fetcher = ShardCache(tmp_path, cache_size=10_000), "http://h/a.tar", Fetcher()
    ctx = multiprocessing.get_context("spawn")
    started = ctx.Event()
    child = ctx.Process(target=_crash_mid_fetch, args=(cache, url, started))
    child.start()
    try:
        assert started.wait(30)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.join()
    [temp] = leftovers(tmp_path)
    assert not cache.contains(url) and cache.total_bytes() == 0
    assert cache.get(url, fetcher(url)).read_bytes() == content(url)
    past = time.time() - STALE_TEMP_AGE - 1
    os.utime(tmp_path / temp, (past, past))
    assert cache.evict() == len(b"partial") and leftovers(tmp_path) == []


def _hammer(cache: ShardCache, worker: int, urls: list[str]) -> tuple[int, int, int]:
    """Gets every URL in a worker-specific order; checks each file's bytes right after it is returned."""
    fetcher, wrong, vanished = Fetcher(), 0, 0
    order = urls[worker::2] + urls[::-1] if worker % 2 else urls + urls[worker::3]
    for i, url in enumerate(order):
        if i % 2:
            with cache.open(url, fetcher(url)) as handle:
                wrong += handle.read() != content(url)
            continue
        path = cache.get(url, fetcher(url))
        try:
            wrong += path.read_bytes() != content(url)
        except FileNotFoundError:
            vanished += 1  # evicted by another process in between: allowed, unlike wrong bytes
    return wrong, vanished, len(fetcher.calls)


def test_many_processes_share_one_small_cache(tmp_path):
    limit = 25_000  # about 8 objects, for 4 processes inserting at once
    cache, urls = ShardCache(tmp_path, cache_size=limit), [f"http://h/s/{i:04d}.tar" for i in range(40)]
    assert pickle.loads(pickle.dumps(cache)).path_for(urls[0]) == cache.path_for(urls[0])
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.starmap(_hammer, [(cache, worker, urls) for worker in range(4)])
    assert [wrong for wrong, _, _ in results] == [0, 0, 0, 0]
    assert sum(fetches for _, _, fetches in results) > len(urls)  # eviction really happened
    assert leftovers(tmp_path) == [] and cache.total_bytes() <= limit
    for name in os.listdir(tmp_path):  # whatever survived is whole
        [url] = [url for url in urls if cache.path_for(url).name == name]
        assert (tmp_path / name).read_bytes() == content(url)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"cache_size": 0}, "cache_size"),
        ({"cache_size": -5}, "cache_size"),
        ({"cache_size": "1GB"}, "cache_size"),
    ],
)
def test_bad_options_name_the_argument(tmp_path, kwargs, name):
    with pytest.raises(ValueError, match=name):
        ShardCache(tmp_path, **kwargs)


@pytest.mark.parametrize(("kwargs", "name"), [({"sha256": "abc"}, "sha256"), ({"size": -1}, "size")])
def test_bad_expectations_name_the_argument(tmp_path, kwargs, name):
    with pytest.raises(ValueError, match=name):
        ShardCache(tmp_path).get("http://h/a.tar", Fetcher()("http://h/a.tar"), **kwargs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(0, 300), min_size=6, max_size=6),
    ops=st.lists(st.integers(0, 5), max_size=20),
    limit=st.integers(1, 700),
)
def test_lru_matches_a_model(sizes, ops, limit):
    urls = [f"http://h/{i}.tar" for i in range(6)]
    fetcher = Fetcher(dict(zip(urls, sizes, strict=True)))
    model: OrderedDict[str, int] = OrderedDict()
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # oversized objects warn; the model covers them
        cache = ShardCache(folder, cache_size=limit)
        for op in ops:
            url, calls = urls[op], len(fetcher.calls)
            cache.get(url, fetcher(url))
            assert len(fetcher.calls) == calls + (url not in model)
            model[url] = sizes[op]
            model.move_to_end(url)
            total = sum(model.values())
            for old in [u for u in model if u != url]:
                if total <= limit:
                    break
                total -= model.pop(old)
            assert {u for u in urls if cache.contains(u)} == set(model)
            assert cache.total_bytes() == total <= max(limit, sizes[op])


def test_an_object_found_missing_is_remembered_so_no_server_is_asked_again(tmp_path):
    """An optional sidecar that is not there costs one request per cache, not one per epoch."""
    from shardstream.io.openers import OpenOptions, read_small
    from tests.servers import FaultServer

    served = tmp_path / "served"
    served.mkdir()
    (served / "here.offsets").write_bytes(b"\0" * 16)
    options = OpenOptions(cache_dir=str(tmp_path / "cache"))
    cache = options.cache()
    with FaultServer(served) as server:
        missing, present = f"{server.url}/gone.offsets", f"{server.url}/here.offsets"
        assert not cache.absent(missing)
        assert read_small(missing, options) is None and cache.absent(missing)
        assert read_small(present, options) == b"\0" * 16 and not cache.absent(present)
        asked = server.request_count
        assert read_small(missing, options) is None and read_small(present, options) == b"\0" * 16
        assert server.request_count == asked == 2  # the second round came from the cache alone
    assert cache.total_bytes() == 16  # the absence marker holds no bytes
