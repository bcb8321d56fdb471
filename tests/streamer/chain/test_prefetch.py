"""Read-ahead: bounded while the shard waits its turn, then the reader's own stream; bytes unchanged."""

from __future__ import annotations

import io
import os
import threading
import time

import pytest

from shardstream.io.http import HttpOptions
from streamer import ShardDataset
from streamer.chain.prefetch import ReadAhead
from tests.conftest import write_dataset
from tests.servers import FaultServer

MIB = 1 << 20


class Recording:
    """A real file whose reads note how far they got and on which thread."""

    def __init__(self, path):
        self.handle = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
        self.read_bytes = 0
        self.threads: set[int] = set()
        self.closed = False

    def readinto(self, view):
        self.threads.add(threading.get_ident())
        count = self.handle.readinto(view)
        self.read_bytes += count
        return count

    def close(self):
        self.closed = True
        self.handle.close()


@pytest.fixture
def shard(tmp_path):
    path = tmp_path / "blob"
    path.write_bytes(os.urandom(12 * MIB + 12345))
    return path


def _wait_until(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


def test_reads_ahead_at_most_its_budget_then_the_reader_takes_the_stream_over(shard):
    stream = Recording(shard)
    ahead = ReadAhead(lambda: ("extra", stream), max_bytes=3 * MIB)
    assert ahead.wait_opened() == "extra"
    # With the budget fetched, the thread parks the stream for the reader and ends: it waits on nothing.
    _wait_until(lambda: not ahead._thread.is_alive())
    assert stream.read_bytes == 3 * MIB
    got = ahead.read()
    assert got == shard.read_bytes()
    assert threading.get_ident() in stream.threads  # after the hand-over the reader read the file itself
    ahead.close()
    assert stream.closed


def test_an_error_after_the_last_needed_byte_stays_unseen(tmp_path):
    data = os.urandom(300_000)

    class BreaksAtTheEnd:
        def __init__(self):
            self.position = 0

        def readinto(self, view):
            if self.position >= len(data):
                raise ConnectionResetError("the server went away after the body")
            count = min(len(view), 100_000, len(data) - self.position)
            view[:count] = data[self.position : self.position + count]
            self.position += count
            return count

        def close(self):
            pass

    ahead = ReadAhead(lambda: (None, BreaksAtTheEnd()), max_bytes=4 * MIB)
    buffer = bytearray(len(data))
    view = memoryview(buffer)
    filled = 0
    while filled < len(data):
        filled += ahead.readinto(view[filled:])
    assert bytes(buffer) == data  # the bytes come first; the error only on a read past them
    with pytest.raises(ConnectionResetError):
        ahead.readinto(bytearray(10))
    ahead.close()


def test_an_error_inside_the_thread_is_raised_on_every_read_never_a_wait():
    from shardstream.format.tarread import iter_samples

    class Broken:
        def readinto(self, view):
            raise AttributeError("a bug inside the stream, not a missing method")

        def close(self):
            pass

    ahead = ReadAhead(lambda: (None, Broken()), max_bytes=2 * MIB)
    assert isinstance(_bounded(lambda: list(iter_samples(ahead, url="u"))), AttributeError)
    with pytest.raises(AttributeError):  # and again on the next read, not a wait on an empty queue
        ahead.readinto(bytearray(10))
    ahead.close()


def test_a_stream_that_cannot_open_is_an_error_on_read_too():
    def refuse():
        raise ConnectionRefusedError("no server")

    ahead = ReadAhead(refuse, max_bytes=MIB)
    with pytest.raises(ConnectionRefusedError):
        ahead.wait_opened()
    assert isinstance(_bounded(lambda: ahead.readinto(bytearray(10))), ConnectionRefusedError)
    ahead.close()


def _bounded(call, seconds=10.0):
    """What ``call`` raised, in a thread that must end in time: a hang fails the test, not hangs it."""
    outcome: list[BaseException] = []

    def run():
        try:
            call()
        except BaseException as exc:  # the test inspects whatever came out
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "hung instead of raising"
    return outcome[0] if outcome else None


class ReadOnly(io.RawIOBase):
    """A stream that implements read() alone: RawIOBase's readinto would only raise."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self.data, self.pos = data, 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        size = len(self.data) - self.pos if size is None or size < 0 else size
        chunk = self.data[self.pos : self.pos + size]
        self.pos += len(chunk)
        return chunk


def test_a_stream_with_only_read_works_through_the_window_and_the_read_ahead():
    """One read rule for both: the tar reader's window and the read-ahead read such a stream alike."""
    import tarfile

    from shardstream.format.tarread import iter_samples

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for i in range(40):
            info = tarfile.TarInfo(f"{i:03d}.bin")
            info.size = 70_000 + i
            tar.addfile(info, io.BytesIO(bytes([i]) * info.size))
    data = buffer.getvalue()
    direct = [(s["__key__"], s["bin"]) for s in iter_samples(ReadOnly(data), url="u")]
    ahead = ReadAhead(lambda: (None, ReadOnly(data)), max_bytes=2 * MIB)
    through_thread: list = []
    pairs = ((s["__key__"], s["bin"]) for s in iter_samples(ahead, url="u"))
    error = _bounded(lambda: through_thread.extend(pairs))
    ahead.close()
    assert error is None
    assert direct == through_thread and len(direct) == 40 and direct[7] == ("007", bytes([7]) * 70_007)


FAST = HttpOptions(connect_timeout=2, read_timeout=1, retries=2, backoff=0.01, max_backoff=0.05)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("prefetch-www")
    write_dataset(root / "d", [5, 5, 5, 5])
    return root


def _tars(server) -> list[str]:
    return sorted(r.path for r in server.requests if r.path.endswith(".tar"))


@pytest.mark.parametrize(("prefetch", "depth"), [(None, 2), (0, 0), (1, 1), (2, 2)])
def test_the_dataset_opens_the_next_shards_before_the_reader_reaches_them(served, prefetch, depth):
    """Seen from the server: while the first sample is held, the next ``depth`` shards are requested."""
    with FaultServer(served) as server:
        url = f"{server.url}/d/shardstream-index.json"
        samples = iter(ShardDataset(url, decode=False, shuffle=False, prefetch=prefetch, http=FAST))
        assert next(samples)["__key__"] == "s000-00000"
        ahead = [f"/d/train-{n:06d}.tar" for n in range(depth + 1)]
        _wait_until(lambda: _tars(server) == ahead, seconds=3)
        time.sleep(0.2)  # a read-ahead deeper than asked would have opened one more by now
        assert _tars(server) == ahead
        rest = [sample["__key__"] for sample in samples]
        assert len(rest) == 19 and rest[-1] == "s003-00004"
        # The read-ahead's own stream is what the reader used: no shard was requested twice.
        assert _tars(server) == [f"/d/train-{n:06d}.tar" for n in range(4)]
