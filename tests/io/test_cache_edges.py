"""The shard cache at its edges: exact limits, names, modes, messages, hits by size, and stale temp files."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import time
import warnings

import pytest

from shardstream.errors import ShardNotFoundError, ShardReadError
from shardstream.io.cache import STALE_TEMP_AGE, ShardCache


def _writer(data: bytes, calls: list | None = None):
    def fetch(handle):
        if calls is not None:
            calls.append(1)
        handle.write(data)

    return fetch


def _temps(folder):
    return sorted(name for name in os.listdir(folder) if name.startswith("."))


def test_exactly_full_is_not_over_the_limit(tmp_path):
    cache = ShardCache(tmp_path, cache_size=200)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an object of exactly cache_size is no warning
        cache.get("http://h/a.tar", _writer(b"a" * 100))
        cache.get("http://h/b.tar", _writer(b"b" * 100))
        assert cache.contains("http://h/a.tar") and cache.contains("http://h/b.tar")
        assert cache.total_bytes() == 200
        cache.get("http://h/c.tar", _writer(b"c" * 200))
    assert [cache.contains(f"http://h/{n}.tar") for n in "abc"] == [False, False, True]


def test_evict_reports_the_bytes_it_freed(tmp_path):
    big = ShardCache(tmp_path)  # unbounded: nothing is evicted on the way in
    for name, size in (("a", 30), ("b", 50), ("c", 70)):
        big.get(f"http://h/{name}.tar", _writer(b"x" * size))
        time.sleep(0.002)
    small = ShardCache(tmp_path, cache_size=100)
    assert small.evict() == 80  # a (30) then b (50), the least recently used, until 70 <= 100
    assert small.total_bytes() == 70 and small.contains("http://h/c.tar")
    assert small.evict() == 0
    assert ShardCache(tmp_path, cache_size=1).evict() == 70


def _at_this_line(filename: str) -> bool:
    # Under mutation testing, mutmut's trampolines stand between this file and the cache, so the warning's
    # stack level lands in one of them: only a plain run can check the caller's line exactly.
    return filename == __file__ or ("MUTANT_UNDER_TEST" in os.environ and "mutmut" in filename)


def test_an_oversized_object_warns_at_the_callers_line_naming_sizes_and_url(tmp_path):
    cache = ShardCache(tmp_path, cache_size=10)
    with pytest.warns(UserWarning) as record:
        cache.get("http://user:pw@h/big.tar", _writer(b"x" * 11))
    [warning] = record
    assert _at_this_line(warning.filename)
    assert str(warning.message) == (
        "http://h/big.tar: 11 bytes is more than cache_size=10; kept anyway, "
        "but the cache is too small to hold it next to anything else"
    )
    with pytest.warns(UserWarning) as record:
        cache.open("http://h/other.tar", _writer(b"y" * 12)).close()
    assert _at_this_line(record[0].filename)


@pytest.mark.parametrize("size", [1, 10**15])
def test_any_positive_cache_size_is_accepted(tmp_path, size):
    assert ShardCache(tmp_path, cache_size=size).cache_size == size


@pytest.mark.parametrize("size", [0, -1, True, 1.5, "1GB"])
def test_a_bad_cache_size_is_refused_with_its_value(tmp_path, size):
    message = rf"^cache_size must be a positive number of bytes or None, got {re.escape(repr(size))}$"
    with pytest.raises(ValueError, match=message):
        ShardCache(tmp_path, cache_size=size)


def test_the_cache_folder_is_made_with_its_parents(tmp_path):
    cache = ShardCache(tmp_path / "a" / "b" / "c")
    assert (tmp_path / "a" / "b" / "c").is_dir()
    assert repr(cache) == f"ShardCache({str(tmp_path / 'a' / 'b' / 'c')!r}, cache_size=None)"
    assert repr(ShardCache(tmp_path, cache_size=5)) == f"ShardCache({str(tmp_path)!r}, cache_size=5)"


def test_a_cached_name_is_the_url_hash_then_its_safe_basename(tmp_path):
    cache = ShardCache(tmp_path)
    url = "https://host/data/train 000001 (copy).tar?x=1"
    digest = hashlib.sha256(url.encode()).hexdigest()[:32]
    assert cache.path_for(url) == tmp_path / f"{digest}-train_000001_copy_.tar"
    assert cache.path_for("https://host/a/b/").name.endswith("-b")
    assert cache.path_for("https://host/a/BOX").name.endswith("-BOX")  # only slashes are trimmed
    assert cache.path_for("https://host/a/b/c.tar").name.endswith("-c.tar")
    assert cache.path_for("https://host/").name.endswith("-object")
    assert cache.path_for("https://host").name.endswith("-object")
    long = "https://host/" + "n" * 150 + "-tail.tar"
    name = cache.path_for(long).name
    assert name.endswith("-tail.tar") and len(name) == 32 + 1 + 100
    assert cache.path_for("https://host/ünï.tar").name.endswith("-_n_.tar")


def test_a_url_from_an_undecodable_file_name_has_a_stable_key(tmp_path):
    cache = ShardCache(tmp_path)
    url = "/data/\udcffshard.tar"  # os.fsdecode of a non-UTF-8 name
    path = cache.get(url, _writer(b"abc"))
    assert path == cache.path_for(url) and path.read_bytes() == b"abc" and cache.contains(url)


def test_a_published_file_is_readable_by_all_and_dated_now(tmp_path):
    cache = ShardCache(tmp_path)
    before = time.time_ns()
    path = cache.get("http://h/a.tar", _writer(b"abc"))
    st = path.stat()
    assert stat.S_IMODE(st.st_mode) == 0o644
    assert before <= st.st_mtime_ns <= time.time_ns()
    handle = cache.open("http://h/b.tar", _writer(b"xyz"))
    assert handle.read() == b"xyz" and handle.tell() == 3
    handle.close()
    assert stat.S_IMODE(cache.path_for("http://h/b.tar").stat().st_mode) == 0o644


def test_a_directory_in_the_cache_is_no_hit_and_is_never_counted(tmp_path):
    cache = ShardCache(tmp_path, cache_size=10)
    cache.path_for("http://h/a.tar").mkdir()
    assert not cache.contains("http://h/a.tar") and cache.total_bytes() == 0
    (tmp_path / "notes").mkdir()
    cache.get("http://h/b.tar", _writer(b"x" * 8))
    assert (tmp_path / "notes").is_dir() and cache.total_bytes() == 8


def test_open_hits_by_size_and_refetches_a_file_of_another_size(tmp_path):
    cache, calls, url = ShardCache(tmp_path), [], "http://h/a.tar"
    cache.open(url, _writer(b"abc", calls), size=3).close()
    os.utime(cache.path_for(url), (1, 1))
    with cache.open(url, _writer(b"abc", calls), size=3) as hit:
        assert hit.read() == b"abc" and len(calls) == 1
    assert cache.path_for(url).stat().st_mtime > 1  # a hit is recently used
    with cache.open(url, _writer(b"abcd", calls), size=4) as refetched:
        assert refetched.read() == b"abcd" and len(calls) == 2
    with cache.open(url, _writer(b"zz", calls)) as any_size:
        assert any_size.read() == b"abcd" and len(calls) == 2


def test_get_of_an_empty_object_with_size_zero(tmp_path):
    cache, calls = ShardCache(tmp_path), []
    path = cache.get("http://h/empty.tar", _writer(b"", calls), size=0)
    assert path.read_bytes() == b"" and cache.get("http://h/empty.tar", _writer(b"", calls), size=0) == path
    assert len(calls) == 1


def test_expectations_are_checked_before_anything_is_fetched(tmp_path):
    cache, calls = ShardCache(tmp_path), []
    digest = hashlib.sha256(b"abc").hexdigest()
    for kwargs, message in (
        ({"sha256": "abc"}, r"^sha256 must be 64 hex digits or None, got 'abc'$"),
        ({"sha256": digest[:-1] + "g"}, r"^sha256 must be 64 hex digits or None"),
        ({"sha256": digest + "0"}, r"^sha256 must be 64 hex digits or None"),
        ({"sha256": b"0" * 64}, r"^sha256 must be 64 hex digits or None"),
        ({"size": -1}, r"^size must be a non-negative number of bytes or None, got -1$"),
        ({"size": True}, r"^size must be a non-negative number of bytes or None, got True$"),
        ({"size": 3.0}, r"^size must be a non-negative number of bytes or None, got 3\.0$"),
    ):
        for method in (cache.get, cache.open):
            with pytest.raises(ValueError, match=message):
                method("http://h/a.tar", _writer(b"abc", calls), **kwargs)
    assert calls == [] and os.listdir(tmp_path) == []
    assert cache.get("http://h/a.tar", _writer(b"abc"), sha256=digest.upper(), size=3).read_bytes() == b"abc"


def test_mismatches_name_what_was_expected_and_what_came(tmp_path):
    cache, url = ShardCache(tmp_path), "http://user:secret@h/a.tar"
    with pytest.raises(ShardReadError, match=r"http://h/a\.tar: size mismatch: expected 4 bytes, got 3$"):
        cache.get(url, _writer(b"abc"), size=4)
    want, got = hashlib.sha256(b"x").hexdigest(), hashlib.sha256(b"abc").hexdigest()
    with pytest.raises(ShardReadError, match=rf": sha256 mismatch: expected {want}, got {got}$") as info:
        cache.open(url, _writer(b"abc"), sha256=want.upper())
    assert info.value.url == "http://h/a.tar" and os.listdir(tmp_path) == []


def test_a_multi_chunk_object_is_hashed_whole(tmp_path):
    data = os.urandom((1 << 20) * 2 + 17)
    path = ShardCache(tmp_path).get(
        "http://h/big.tar", _writer(data), sha256=hashlib.sha256(data).hexdigest()
    )
    assert path.read_bytes() == data
    with pytest.raises(ShardReadError, match="sha256 mismatch"):
        ShardCache(tmp_path).get(
            "http://h/big2.tar", _writer(data), sha256=hashlib.sha256(data[:-1]).hexdigest()
        )


def test_fetch_errors_name_the_url_without_credentials(tmp_path):
    cache, url = ShardCache(tmp_path), "http://user:secret@h/a.tar"

    def missing(handle):
        raise FileNotFoundError("no such object")

    def broken(handle):
        raise ConnectionResetError("peer reset")

    with pytest.raises(ShardNotFoundError, match=r"^http://h/a\.tar: fetch found nothing: no such object$"):
        cache.get(url, missing)
    with pytest.raises(ShardReadError, match=r"^http://h/a\.tar: fetch failed: peer reset$") as info:
        cache.open(url, broken)
    assert not isinstance(info.value, ShardNotFoundError) and os.listdir(tmp_path) == []


def test_a_cache_folder_removed_under_a_job_is_a_read_error(tmp_path):
    cache = ShardCache(tmp_path / "c")
    (tmp_path / "c").rmdir()  # removed under a running job
    with pytest.raises(
        ShardReadError, match=r"^http://h/a\.tar: cannot create a temp file in cache .*/c: "
    ) as info:
        cache.get("http://h/a.tar", _writer(b"abc"))
    assert isinstance(info.value.__cause__, OSError)


def test_a_cache_dir_that_is_a_file_is_refused_naming_it(tmp_path):
    (tmp_path / "c").write_bytes(b"")
    for folder in (tmp_path / "c", tmp_path / "c" / "sub"):
        with pytest.raises(ValueError, match=rf"^cache_dir '{re.escape(str(folder))}' is not a folder"):
            ShardCache(folder)


@pytest.mark.parametrize("how", ["get", "open"])
def test_a_cache_folder_replaced_by_a_file_under_a_job_is_a_read_error(tmp_path, how):
    cache = ShardCache(tmp_path / "c")
    (tmp_path / "c").rmdir()
    (tmp_path / "c").write_bytes(b"not a folder")
    url = "http://user:secret@h/a.tar"
    shown = r"^http://h/a\.tar: (cannot create a temp file in )?cache .*/c[: ]"
    with pytest.raises(ShardReadError, match=shown) as info:
        getattr(cache, how)(url, _writer(b"abc"))
    assert isinstance(info.value.__cause__, OSError) and "secret" not in str(info.value)


def test_absence_is_remembered_per_url_even_after_the_folder_went(tmp_path):
    cache = ShardCache(tmp_path / "c")
    assert not cache.absent("http://h/x.offsets")
    (tmp_path / "c").rmdir()
    cache.remember_absent("http://h/x.offsets")
    cache.remember_absent("http://h/x.offsets")  # twice is fine
    assert cache.absent("http://h/x.offsets") and not cache.absent("http://h/y.offsets")
    assert not cache.contains("http://h/x.offsets")
    marker = cache.path_for("http://h/x.offsets")
    assert (marker.parent / (marker.name + ".absent")).is_file()


def test_only_our_stale_temp_files_go(tmp_path):
    cache = ShardCache(tmp_path)
    past = time.time() - STALE_TEMP_AGE - 5
    recent = time.time() - STALE_TEMP_AGE + 60
    names = {".a.1.x.tmp": past, ".b.1.x.tmp": recent, ".hidden": past, "c.tmp": past, ".d.tmp.keep": past}
    for name, when in names.items():
        (tmp_path / name).write_bytes(b"1234")
        os.utime(tmp_path / name, (when, when))
    assert cache.evict() == 4
    assert sorted(os.listdir(tmp_path)) == [".b.1.x.tmp", ".d.tmp.keep", ".hidden", "c.tmp"]
    assert cache.total_bytes() == 4  # c.tmp is a published name; dot files never count


def test_objects_fetched_in_a_burst_are_evicted_in_fetch_order(tmp_path):
    """Published files are dated with a fine clock: a burst of fetches keeps its order, ties never decide."""
    cache = ShardCache(tmp_path, cache_size=100)
    # Names that sort against the fetch order, so a tie broken by name would evict the newest first.
    urls = sorted((f"http://h/{i}.tar" for i in range(30)), key=cache.path_for, reverse=True)
    for url in urls[:10]:
        cache.get(url, _writer(b"x" * 10))
    for k, url in enumerate(urls[10:]):
        cache.get(url, _writer(b"x" * 10))
        assert [cache.contains(u) for u in urls] == [False] * (k + 1) + [True] * 10 + [False] * (19 - k), k


def test_a_fetch_that_keeps_the_remote_mtime_still_publishes_a_recently_used_file(tmp_path):
    """A download that copies the source's date (as ``cp -p`` would) must not make its file look oldest."""
    cache = ShardCache(tmp_path, cache_size=20)

    def dated(handle):
        handle.write(b"b" * 10)
        handle.flush()
        os.utime(handle.fileno(), (1, 1))

    cache.get("http://h/a.tar", _writer(b"a" * 10))
    before = time.time()
    cache.get("http://h/b.tar", dated)
    assert cache.path_for("http://h/b.tar").stat().st_mtime >= before - 1
    cache.get("http://h/c.tar", _writer(b"c" * 10))
    assert [cache.contains(f"http://h/{n}.tar") for n in "abc"] == [False, True, True]


@pytest.mark.parametrize("how", ["get", "open"])
def test_a_folder_where_a_cached_file_belongs_is_no_hit_and_a_publish_error(tmp_path, how):
    cache = ShardCache(tmp_path / "c")
    cache.path_for("http://u:pw@h/a.tar").mkdir()
    expected = r"^http://h/a\.tar: cannot publish to cache .*/c: \[Errno 21\] Is a directory"
    with pytest.raises(ShardReadError, match=expected) as info:
        getattr(cache, how)("http://u:pw@h/a.tar", _writer(b"abc"))
    assert isinstance(info.value.__cause__, IsADirectoryError) and _temps(tmp_path / "c") == []


def test_dot_files_and_links_in_the_cache_are_never_counted_or_evicted(tmp_path):
    cache = ShardCache(tmp_path / "c", cache_size=1000)
    outside = tmp_path / "big.bin"
    outside.write_bytes(b"x" * 5000)
    for i in range(20):
        (tmp_path / "c" / f".note-{i}").write_bytes(b"y" * 100)
        cache.get(f"http://h/{i}.tar", _writer(b"z" * 10))
    (tmp_path / "c" / "zz-link.tar").symlink_to(outside)
    assert cache.total_bytes() == 200  # 20 files of 10 bytes, whatever order the folder lists them in
    cache.get("http://h/more.tar", _writer(b"w" * 10))
    assert cache.total_bytes() == 210 and (tmp_path / "c" / "zz-link.tar").is_symlink()


def test_a_stale_looking_link_is_not_a_stale_temp_file(tmp_path):
    cache = ShardCache(tmp_path / "c")
    target = tmp_path / "old.bin"
    target.write_bytes(b"o" * 50)
    past = time.time() - STALE_TEMP_AGE - 60
    os.utime(target, (past, past))
    (tmp_path / "c" / ".a.1.x.tmp").symlink_to(target)  # lstat: the link itself is new
    assert cache.evict() == 0 and (tmp_path / "c" / ".a.1.x.tmp").is_symlink()


def test_evict_frees_the_sum_of_every_stale_temp_file(tmp_path):
    cache = ShardCache(tmp_path)
    past = time.time() - STALE_TEMP_AGE - 5
    for name, size in ((".a.1.x.tmp", 30), (".b.2.y.tmp", 12), (".c.3.z.tmp", 7)):
        (tmp_path / name).write_bytes(b"t" * size)
        os.utime(tmp_path / name, (past, past))
    assert cache.evict() == 49 and os.listdir(tmp_path) == []


def test_a_file_used_after_the_new_one_is_evicted_past_it(tmp_path):
    """Another process used a file "later" than this fetch (clock skew): it goes, the new one stays."""
    cache = ShardCache(tmp_path, cache_size=100)
    cache.get("http://h/other.tar", _writer(b"o" * 60))
    future = time.time() + 3600
    os.utime(cache.path_for("http://h/other.tar"), (future, future))
    path = cache.get("http://h/new.tar", _writer(b"n" * 50))
    assert path.exists() and not cache.contains("http://h/other.tar") and cache.total_bytes() == 50


@pytest.mark.parametrize("hit", [False, True], ids=["miss", "hit-of-another-size"])
def test_open_checks_what_it_fetches_against_the_expected_size_and_sha256(tmp_path, hit):
    cache = ShardCache(tmp_path)
    url = "http://h/a.tar"
    if hit:
        cache.get(url, _writer(b"old"))
    right = hashlib.sha256(b"abcd").hexdigest()
    with pytest.raises(ShardReadError, match=r"size mismatch: expected 5 bytes, got 4"):
        cache.open(url, _writer(b"abcd"), size=5)
    with pytest.raises(ShardReadError, match=r"sha256 mismatch"):
        cache.open(url, _writer(b"abcd"), sha256="0" * 64, size=4 if hit else None)
    with cache.open(url, _writer(b"abcd"), sha256=right, size=4) as handle:
        assert handle.read() == b"abcd"


def test_absence_is_remembered_after_the_cache_folder_and_its_parents_went(tmp_path):
    cache = ShardCache(tmp_path / "a" / "b" / "c")
    shutil.rmtree(tmp_path / "a")
    cache.remember_absent("http://h/a.tar.offsets")
    assert cache.absent("http://h/a.tar.offsets") and not cache.absent("http://h/b.tar.offsets")


def _immutable(path, on: bool) -> bool:
    """chattr +i / -i: a file even root cannot unlink (ext4 and most local filesystems, as root)."""
    result = subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True, check=False)
    return result.returncode == 0


def test_a_file_that_cannot_be_evicted_is_a_read_error_naming_the_cache_and_url(tmp_path):
    cache = ShardCache(tmp_path / "cache", cache_size=150)
    old = cache.get("http://example.test/a.tar", _writer(b"a" * 100))
    if not _immutable(old, True):
        pytest.skip("chattr +i is not available here (needs root on a local filesystem)")
    try:
        with pytest.raises(ShardReadError) as failed:
            cache.open("http://user:secret@example.test/b.tar", _writer(b"b" * 100))
    finally:
        _immutable(old, False)
    assert str(failed.value) == (
        f"http://example.test/b.tar: cannot evict from cache {cache.cache_dir}: [Errno 1] Operation not "
        f"permitted: '{old}'"
    )
    assert failed.value.url == "http://example.test/b.tar"  # named, without the credentials
    assert isinstance(failed.value.__cause__, PermissionError)


_CLOSE_FAILS = """
import resource, signal, sys
from pathlib import Path
from shardstream.errors import ShardReadError
from shardstream.io.cache import ShardCache

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
folder = Path(sys.argv[1])

def fetch(handle):  # small writes: the one that fails leaves bytes in the buffer, so close() fails too
    for _ in range(100):
        handle.write(b"x" * 1000)

try:
    ShardCache(folder).open("http://example.test/big.tar", fetch)
except ShardReadError as exc:
    print(type(exc.__cause__).__name__, exc)
print(sorted(p.name for p in folder.iterdir()))
"""


def test_a_temp_file_whose_close_fails_is_still_removed(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    result = subprocess.run(
        [sys.executable, "-c", _CLOSE_FAILS, str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == [
        "OSError http://example.test/big.tar: fetch failed: [Errno 27] File too large",
        "[]",
    ]
