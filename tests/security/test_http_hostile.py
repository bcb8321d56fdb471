"""Hostile HTTP servers (issue 32, items 6, 9 and 11): a range answer from the wrong byte is an error, never
a spliced shard; configured headers reach only the origin they were given for; metadata downloads (index,
sidecar, key file) are capped in size and time, and a gzip answer is decoded, never a bare UnicodeDecodeError.
Every server here is a real socket (``tests/servers/hostile.py``) saying what a test scripts."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shardstream.errors import ShardReadError, StreamError
from shardstream.io.http import HEADERS_ENV, HttpOptions, HttpStream
from shardstream.io.openers import OpenOptions, read_small
from streamer import ShardDataset, ShardMap
from tests.conftest import write_dataset
from tests.servers.hostile import Asked, HostileServer, reply, write_head

pytestmark = pytest.mark.timeout(60)  # a hang is the bug: fail, do not wait for CI's limit

FAST = HttpOptions(connect_timeout=2, read_timeout=2, retries=2, backoff=0.01, max_backoff=0.02)
SECRET = {"X-Token": "tok-not-for-others", "Authorization": "Bearer not-for-others"}
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, bytes]:
    """A two-shard dataset (30 samples in the first) as the bytes each path serves."""
    root = tmp_path_factory.mktemp("www") / "d"
    write_dataset(root, [30, 4], payload=200)
    return {f"/d/{p.name}": p.read_bytes() for p in root.iterdir()}


def _serve(files: dict[str, bytes], *, from_zero: bool = False, drop: dict[str, int] | None = None):
    """Serve ``files`` honestly, or (``from_zero``) answer every Range with the whole object from byte 0
    and an honest ``Content-Range: bytes 0-...``; ``drop``: path -> bytes its first GET sends, then closes."""

    async def answer(asked: Asked, writer) -> bool:
        body = files.get(asked.path)
        if body is None:
            return await reply(writer, 404, b"not found\n")
        headers = {"ETag": '"v1"', "Accept-Ranges": "bytes"}
        status, send = 200, (drop or {}).get(asked.path) if asked.count == 1 else None
        wanted = asked.headers.get("range")
        if wanted:
            start, _, last = wanted.removeprefix("bytes=").partition("-")
            first, final = (0, len(body) - 1) if from_zero else (int(start), int(last or len(body) - 1))
            status, body = 206, body[first : final + 1]
            headers["Content-Range"] = f"bytes {first}-{final}/{len(files[asked.path])}"
        return await reply(writer, status, body, headers, send=send)

    return answer


# -- 6. a range answer that starts elsewhere than asked -----------------------------------------------------


def test_a_resume_answered_from_byte_0_is_an_error_never_a_spliced_shard(files):
    """The first connection drops mid-shard; the resume's 206 starts at byte 0: 30 samples, 15 distinct."""
    shard = "/d/train-000000.tar"
    with HostileServer(_serve(files, from_zero=True, drop={shard: len(files[shard]) // 2})) as server:
        keys = []
        with pytest.raises(StreamError, match=r"train-000000\.tar.*Content-Range"):
            for sample in ShardDataset(server.url + shard, decode=False, shuffle=False, http=FAST):
                keys.append(sample["__key__"])
        assert len(keys) == len(set(keys)) < 30  # nothing twice: the splice was never read as samples
        first, resume = [r for r in server.requests if r.path == shard][:2]
        assert first.range is None and resume.range == f"bytes={len(files[shard]) // 2}-"
        assert not server.errors


def test_a_stream_refuses_a_206_that_starts_elsewhere_than_asked(files):
    shard = "/d/train-000000.tar"
    with HostileServer(_serve(files, from_zero=True)) as server:
        with pytest.raises(ShardReadError, match=r"asked for bytes 1024-.*answered bytes 0-") as caught:
            HttpStream(server.url + shard, 1024, FAST).read()
        assert caught.value.offset == 1024
        # From byte 0 and longer than asked: the bytes asked for are there, and only those are read.
        with HttpStream(server.url + shard, 0, FAST, end=512) as stream:
            assert stream.read() == files[shard][:512]


def test_shardmap_never_hands_out_sample_0_for_every_index(files):
    with HostileServer(_serve(files, from_zero=True)) as server:
        samples = ShardMap(server.url + "/d/shardstream-index.json", decode=False, http=FAST)
        assert samples[0]["__key__"] == "s000-00000"
        for index in (5, 29, 31):
            with pytest.raises(StreamError, match="Content-Range"):
                samples[index]


# -- 9. headers reach only the origin they were given for ---------------------------------------------------


def _redirect_to(target: HostileServer, files: dict[str, bytes]):
    """Serve ``files``; ``/go/<path>`` answers 302 to ``<path>`` on ``target`` (another origin)."""
    serve = _serve(files)

    async def answer(asked: Asked, writer) -> bool:
        if asked.path.startswith("/go/"):
            return await reply(writer, 302, b"", {"Location": target.url + asked.path[3:]})
        return await serve(asked, writer)

    return answer


def _sent_secret(server: HostileServer) -> list[str]:
    return [r.path for r in server.requests if {"x-token", "authorization"} & set(r.headers)]


@pytest.mark.parametrize("given", ["options", "environment"])
def test_a_redirect_to_another_origin_drops_every_configured_header(files, given, monkeypatch):
    options = FAST
    if given == "options":
        options = HttpOptions(connect_timeout=2, read_timeout=2, retries=2, backoff=0.01, headers=SECRET)
    else:
        monkeypatch.setenv(HEADERS_ENV, json.dumps(SECRET))
    with (
        HostileServer(_serve(files), host="localhost") as other,
        HostileServer(_redirect_to(other, files)) as origin,
    ):
        index = files["/d/shardstream-index.json"]
        assert read_small(origin.url + "/go/d/shardstream-index.json", OpenOptions(http=options)) == index
        assert _sent_secret(origin) == ["/go/d/shardstream-index.json"]
        assert [r.path for r in other.requests] == ["/d/shardstream-index.json"]
        assert _sent_secret(other) == []


def _foreign_index(files: dict[str, bytes], other: HostileServer) -> dict[str, bytes]:
    """``files`` whose index names its shards by absolute URLs on ``other``."""
    doc = json.loads(files["/d/shardstream-index.json"])
    names = [f"train-{n:06d}.tar" for n in range(len(doc["shards"]))]
    doc["pattern"] = None
    for row, name in zip(doc["shards"], names, strict=True):
        row[0] = f"{other.url}/d/{name}"
    return {**files, "/d/shardstream-index.json": json.dumps(doc).encode()}


@pytest.mark.parametrize("given", ["options", "environment"])
def test_a_remote_index_naming_another_host_gets_no_headers_sent_there(files, given, monkeypatch):
    options = HttpOptions(connect_timeout=2, read_timeout=2, retries=2, backoff=0.01, headers=SECRET)
    if given == "environment":
        monkeypatch.setenv(HEADERS_ENV, json.dumps(SECRET))
        options = FAST
    other = HostileServer(_serve(files), host="localhost")
    with other, HostileServer(_serve(_foreign_index(files, other.start()))) as origin:
        url = origin.url + "/d/shardstream-index.json"
        keys = [s["__key__"] for s in ShardDataset(url, decode=False, shuffle=False, http=options)]
        assert len(keys) == 34
        assert _sent_secret(origin) == ["/d/shardstream-index.json"]
        assert {r.path for r in other.requests} >= {"/d/train-000000.tar", "/d/train-000001.tar"}
        assert _sent_secret(other) == []
        # Allowed by the user: both origins named, both get the headers.
        other.clear_log()
        allowed = HttpOptions(read_timeout=2, retries=2, headers=SECRET, origins=(origin.url, other.url))
        assert len(list(ShardDataset(url, decode=False, shuffle=False, http=allowed))) == 34
        assert "/d/train-000001.tar" in _sent_secret(other)


@pytest.mark.parametrize("command", [["ls"], ["stats"], ["cat", "s001-00002", "txt"]])
def test_the_cli_over_a_remote_index_sends_headers_only_to_its_origin(files, command, monkeypatch):
    """ls, stats and cat bind $SHARDSTREAM_HTTP_HEADERS to SOURCE's origin as a dataset does."""
    monkeypatch.setenv(HEADERS_ENV, json.dumps(SECRET))
    other = HostileServer(_serve(files), host="localhost")
    with other, HostileServer(_serve(_foreign_index(files, other.start()))) as origin:
        url = origin.url + "/d/shardstream-index.json"
        run = [sys.executable, "-m", "shardstream_cli", command[0], url, *command[1:]]
        done = subprocess.run(run, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert {r.path for r in other.requests} & {"/d/train-000000.tar", "/d/train-000001.tar"}
        assert _sent_secret(other) == []
        assert "/d/shardstream-index.json" in _sent_secret(origin)


def test_origins_are_checked_and_compared_by_scheme_host_and_port():
    options = HttpOptions(headers={"X-Token": "t"}, origins=("HTTP://Example.com", "https://b.example:8443/"))
    assert options.origins == ("http://example.com:80", "https://b.example:8443")
    assert options.headers_for("http://example.com/x.tar")["X-Token"] == "t"
    assert options.headers_for("http://EXAMPLE.com:80/x.tar")["X-Token"] == "t"
    for elsewhere in ("https://example.com/x.tar", "http://example.com:8080/x", "https://b.example/x"):
        assert "X-Token" not in options.headers_for(elsewhere)
    with pytest.raises(ValueError, match="origins"):
        HttpOptions(origins=("example.com",))
    # A dataset binds to its source's origins; an index on local disk (the user's own) binds nothing.
    unbound = HttpOptions(headers={"X-Token": "t"})
    assert unbound.bound_to("http://A.example/d/index.json").origins == ("http://a.example:80",)
    assert unbound.bound_to(["/data/index.json", "https://b.example/{0..3}.tar"]).origins == (
        "https://b.example:443",
    )
    assert unbound.bound_to("/data/shardstream-index.json").origins is None
    assert options.bound_to("http://other.example/i.json") is options  # origins given: they stand


# -- 11. metadata downloads: capped in size and time, gzip decoded ------------------------------------------


async def _endless(asked: Asked, writer) -> bool:
    """An index body with no length that never ends (until 512 MiB, so a reader without a cap still ends)."""
    await write_head(writer, 200, {"Content-Type": "application/json", "Connection": "close"})
    chunk = b"[" + b" " * ((1 << 20) - 1)
    for _ in range(512):
        writer.write(chunk)
        await writer.drain()
    return False


# Peak RSS read from /proc (VmHWM: this program's own): ru_maxrss of a child carries its parent's peak over
# from the fork, and the parent here holds torch.
_PEAK = (
    'peak = lambda: int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]) << 10'
)
_CHILD = """
import sys, time
sys.path.insert(0, {root!r})
{peak}
from shardstream.io.http import HttpOptions
from shardstream.io.openers import OpenOptions, read_small
before = peak()
started = time.monotonic()
try:
    read_small({url!r}, OpenOptions(http=HttpOptions(max_metadata_size={cap})))
except Exception as exc:
    print(type(exc).__name__, exc)
print("grew", peak() - before, "in", time.monotonic() - started)
"""


def test_an_endless_index_body_stops_at_the_configured_cap_with_bounded_memory():
    cap = 8 << 20
    with HostileServer(_endless) as server:
        url = server.url + "/d/shardstream-index.json"
        code = _CHILD.format(root=str(ROOT), url=url, cap=cap, peak=_PEAK)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=50)
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done.stdout + done.stderr
    assert lines[0].startswith("ShardReadError") and url in lines[0], lines[0]
    assert "8 MiB" in lines[0] and "max_metadata_size" in lines[0], lines[0]
    grew = int(lines[1].split()[1])
    assert grew < 4 * cap, f"peak RSS grew {grew >> 20} MiB reading an index capped at 8 MiB"


def test_shardstream_info_on_an_endless_index_fails_clearly_within_the_default_cap():
    with HostileServer(_endless) as server:
        url = server.url + "/d/shardstream-index.json"
        code = (
            f"import sys; sys.path.insert(0, {str(ROOT)!r}); sys.argv = ['shardstream', 'info', {url!r}]\n"
            f"{_PEAK}\nfrom shardstream_cli import app\n"
            "try:\n    app()\nexcept SystemExit as exc:\n    code = exc.code\n"
            "print('peak', peak(), 'exit', code)\n"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=50)
    _, peak, _, code = done.stdout.split()[-4:]
    assert code != "0" and "256 MiB" in done.stderr and "max_metadata_size" in done.stderr, done.stderr
    assert url in done.stderr
    assert int(peak) < 512 << 20, f"peak RSS {int(peak) >> 20} MiB for a 256 MiB cap"


def test_a_declared_length_over_the_cap_is_refused_before_any_byte_is_read():
    async def huge(asked: Asked, writer) -> bool:
        await write_head(writer, 200, {"Content-Length": str(10 << 30)})
        writer.write(b"[" * 4096)
        await writer.drain()
        return False

    with HostileServer(huge) as server:
        started = time.monotonic()
        with pytest.raises(ShardReadError, match=r"10 GiB.*max_metadata_size"):
            read_small(server.url + "/i.json", OpenOptions(http=FAST))
        assert time.monotonic() - started < 2


@pytest.mark.timeout(20)  # today: 50 s of trickle, so the before-run fails here rather than waiting
def test_a_trickling_metadata_answer_meets_the_whole_request_deadline():
    async def trickle(asked: Asked, writer) -> bool:
        await write_head(writer, 200, {"Content-Length": "100"})
        for _ in range(100):
            writer.write(b" ")
            await writer.drain()
            await __import__("asyncio").sleep(0.5)
        return False

    options = HttpOptions(read_timeout=5, retries=0, metadata_deadline=2)
    with HostileServer(trickle) as server:
        started = time.monotonic()
        with pytest.raises(ShardReadError, match=r"metadata_deadline") as caught:
            read_small(server.url + "/i.json", OpenOptions(http=options))
        assert time.monotonic() - started < 4
        assert "2 s" in str(caught.value) and server.url in str(caught.value)


def _gzip_index(files: dict[str, bytes], bomb: bytes | None = None):
    serve = _serve(files)

    async def answer(asked: Asked, writer) -> bool:
        if asked.path.endswith(".json"):
            body = gzip.compress(bomb if bomb is not None else files[asked.path])
            return await reply(writer, 200, body, {"Content-Encoding": "gzip"})
        return await serve(asked, writer)

    return answer


def test_a_gzip_encoded_index_is_decoded(files):
    with HostileServer(_gzip_index(files)) as server:
        url = server.url + "/d/shardstream-index.json"
        assert read_small(url, OpenOptions(http=FAST)) == files["/d/shardstream-index.json"]
        assert len(list(ShardDataset(url, decode=False, http=FAST))) == 34


def test_a_gzip_bomb_index_stops_at_the_cap(files):
    with HostileServer(_gzip_index(files, bomb=b" " * (64 << 20))) as server:
        options = HttpOptions(read_timeout=2, retries=0, max_metadata_size=1 << 20)
        with pytest.raises(ShardReadError, match=r"1 MiB.*max_metadata_size"):
            read_small(server.url + "/d/shardstream-index.json", OpenOptions(http=options))


def test_the_cache_path_is_capped_too(tmp_path):
    with HostileServer(_endless) as server:
        opening = OpenOptions(http=HttpOptions(max_metadata_size=1 << 20), cache_dir=str(tmp_path / "c"))
        with pytest.raises(ShardReadError, match="max_metadata_size"):
            read_small(server.url + "/d/shardstream-index.json", opening)
    assert sum(f.stat().st_size for f in (tmp_path / "c").rglob("*") if f.is_file()) < 2 << 20
