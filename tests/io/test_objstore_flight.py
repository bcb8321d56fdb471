"""s3:// bytes in flight on the shaped S3 server: one budget across the shards a worker has open, the next
shards' first parts asked for while the current one is read, a late part hedged, a wrong span refused.
Measured at the server (its request log: arrival and answer times, ranges, faults); nothing is mocked.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from packer import PackOptions, pack
from shardstream.errors import ShardReadError
from shardstream.io.objstore import ObjectStream
from shardstream.io.objstoreoptions import ObjectStoreOptions
from shardstream.io.openers import OpenOptions, read_range
from shardstream_cli.demo.synth import make_corpus
from streamer import ShardDataset
from tests.conftest import members_by_key
from tests.servers.shaped_s3 import ShapedS3Server

pytest_plugins = ["tests.servers.shaped_fixtures"]
pytest.importorskip("obstore", reason="native s3:// needs obstore: pip install obstore")

INDEX = "shardstream-index.json"
PART = 2048


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("flight") / "corpus", 16, video=False).files_dir


@pytest.fixture
def served(pointed_s3: ShapedS3Server, corpus: Path) -> Iterator[tuple[ShapedS3Server, str]]:
    """8 shards of 2 samples (10-31 KiB: 5-16 parts of 2 KiB) in the server's folder, the process pointed
    at it."""
    pack(corpus, pointed_s3.root / "packed", PackOptions(max_count=2))
    yield pointed_s3, f"s3://{pointed_s3.bucket}/packed"


def _on_disk(srv: ShapedS3Server) -> dict[str, dict]:
    return members_by_key(ShardDataset(str(srv.root / "packed" / INDEX), decode=False, shuffle=False))


def _shard_ranges(srv: ShapedS3Server) -> list:
    return [r for r in srv.requests if r.kind == "range" and r.path.endswith(".tar")]


def _read_all(stream) -> bytes:
    got = b""
    while chunk := stream.read(1 << 20):
        got += chunk
    return got


def test_bytes_in_flight_stay_within_one_budget_across_the_shards_read_ahead(served):
    """Two shards read ahead of the current one, 8 parts each allowed, 4 parts of budget: never more than 4
    ranged GETs open at the server, and never more than 4 parts held in this process."""
    from shardstream.io.flight import budget_for  # here, not above: a run on older code fails only here

    srv, url = served
    srv.ttfb, srv.rate = 0.01, 200e3  # each part's GET stays open ~20 ms: the overlap shows
    budget = 4 * PART
    options = ObjectStoreOptions(part_size=PART, parts_in_flight=8, bytes_in_flight=budget, hedge_after=None)
    srv.reset_log()
    ds = ShardDataset(f"{url}/{INDEX}", decode=False, shuffle=False, prefetch=2, object_store=options)
    assert members_by_key(ds) == _on_disk(srv)
    most = srv.max_concurrent(kind="range", path_suffix=".tar")
    assert most <= budget // PART, f"{most} parts of {PART} bytes in flight at once, budget {budget}"
    assert most >= 2  # parts did go out in parallel
    held = budget_for(budget, PART)
    assert held.peak <= budget
    deadline = time.monotonic() + 5
    while held.used and time.monotonic() < deadline:  # a part running at close gives its room back after
        time.sleep(0.01)
    assert held.used == 0


def test_the_next_shards_first_part_is_asked_for_while_the_current_one_is_read(served):
    """A budget either of the first two shards could fill alone (4 parts; each has 10 or more): the shard
    read and the one read ahead (opened at once, in either order) take turns, neither waiting until the
    other has asked for all its parts. (Later shards are read ahead whole while the one before is read:
    these shards are small.)"""
    srv, url = served
    srv.ttfb, srv.rate = 0.01, 200e3
    part = 1024
    options = ObjectStoreOptions(
        part_size=part, parts_in_flight=4, bytes_in_flight=4 * part, hedge_after=None
    )
    srv.reset_log()
    ds = ShardDataset(f"{url}/{INDEX}", decode=False, shuffle=False, prefetch=1, object_store=options)
    assert members_by_key(ds) == _on_disk(srv)
    ranges = _shard_ranges(srv)
    shards = sorted({r.path for r in ranges})
    assert len(shards) == 8

    def asked_after_the_first_of(path: str, other: str) -> int:
        """How many of ``path``'s parts went out after ``other``'s first (a tie is not an overlap)."""
        first = min(r.began for r in ranges if r.path == other)
        return sum(r.began > first for r in ranges if r.path == path)

    a, b = shards[0], shards[1]
    assert asked_after_the_first_of(a, b) >= 3, "the shard read ahead waited for the current one"
    assert asked_after_the_first_of(b, a) >= 3, "the current shard waited for the one read ahead"


def test_a_shard_opened_while_another_holds_the_budget_gets_a_part_before_that_one_is_all_asked(served):
    """The read-ahead's case, in order: shard A opened and read (a budget of 4 parts, A has 25), shard B
    opened after it and read in a thread as the streamer's read-ahead does. B's first part must not wait
    until A has asked for its last: one part of the budget is kept for a reader with nothing in flight."""
    srv, url = served
    srv.ttfb, srv.rate = 0.01, 200e3
    part = 1024
    options = ObjectStoreOptions(
        part_size=part, parts_in_flight=4, bytes_in_flight=4 * part, hedge_after=None
    )
    a, b = "packed/train-000000.tar", "packed/train-000001.tar"
    srv.reset_log()
    got: dict[str, bytes] = {}

    def read_ahead() -> None:  # opened once A holds the budget, as the streamer's read-ahead opens it
        with ObjectStream(f"{url}/train-000001.tar", 0, options) as second:
            got[b] = _read_all(second)

    with ObjectStream(f"{url}/train-000000.tar", 0, options) as first:
        start = b"".join(first.read(part) for _ in range(3))  # two parts handed out: A asks for 4 at
        # once, the whole budget
        ahead = threading.Thread(target=read_ahead)
        ahead.start()
        got[a] = start + _read_all(first)
        ahead.join(10)
    assert got == {a: (srv.root / a).read_bytes(), b: (srv.root / b).read_bytes()}
    ranges = _shard_ranges(srv)
    first_of_b = min(r.began for r in ranges if r.path.endswith(b))
    after = sum(r.began > first_of_b for r in ranges if r.path.endswith(a))
    assert after >= 3, f"{b}'s first part went out when only {after} of {a}'s parts were left to ask for"


def test_a_stalled_part_is_hedged_and_the_shard_reads_in_much_less_than_the_stall(served):
    srv, url = served
    key = "packed/train-000007.tar"
    data = (srv.root / key).read_bytes()
    options = ObjectStoreOptions(part_size=4096)  # several parts; hedging as by default
    srv.stall(key, 5.0)  # the first GET of the shard waits 5 s for its first byte
    started = time.monotonic()
    with ObjectStream(f"{url}/train-000007.tar", 0, options) as stream:
        got = _read_all(stream)
    seconds = time.monotonic() - started
    assert seconds < 2.0, f"{seconds:.1f} s: the stalled part was waited out, not hedged"
    assert got == data
    assert stream.hedges == 1
    gets = [r for r in srv.requests if r.path.endswith(key) and r.kind == "range"]
    stalled = next(r.range for r in gets if r.fault == "stall")
    assert [r.range for r in gets].count(stalled) == 2  # the hedge: the same range again, once
    # A single ranged read (a deferred sample) is hedged too.
    srv.stall(key, 5.0)
    started = time.monotonic()
    assert (
        read_range(f"{url}/train-000007.tar", 100, 3000, OpenOptions(object_store=options)) == data[100:3000]
    )
    assert time.monotonic() - started < 2.0


def test_an_answer_for_another_span_is_an_error_naming_url_and_offset_never_spliced(served):
    srv, url = served
    key = "packed/train-000006.tar"
    shard = f"{url}/train-000006.tar"
    opening = OpenOptions(object_store=ObjectStoreOptions(part_size=4096, backoff=0.01, max_backoff=0.05))
    srv.shift_range(key, 512)  # the next range answer: the span 512 bytes further on, said so
    started = time.monotonic()
    with pytest.raises(ShardReadError, match="another span than the range asked for") as caught:
        read_range(shard, 100, 1100, opening)
    assert time.monotonic() - started < 1.0
    assert caught.value.offset == 100 and shard in str(caught.value)
    assert len([r for r in srv.requests if r.path.endswith(key) and r.kind == "range"]) == 1  # not retried
    # A shard read whole: the part that came back wrong fails the read at its offset.
    srv.shift_range(key, 512)
    with (
        pytest.raises(ShardReadError, match="another span") as caught,
        ObjectStream(shard, 0, opening.object_store) as stream,
    ):
        _read_all(stream)
    assert caught.value.offset is not None and caught.value.offset % 4096 == 0
