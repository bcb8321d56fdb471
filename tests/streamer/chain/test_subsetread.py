"""KeptBytes: a shard's kept spans end to end, read from a mapped file (C or Python) or a stream that
cannot be mapped, always exactly the spans' bytes."""

from __future__ import annotations

import io

import pytest

from streamer.chain.subsetread import KeptBytes, _native_gather


def _opener(path):
    def open_at(byte):
        handle = open(path, "rb")  # noqa: SIM115 - KeptBytes closes it
        handle.seek(byte)
        return handle

    return open_at


class Unmappable(io.RawIOBase):
    """A stream without a descriptor (as HTTP's): KeptBytes must read it, opening one a span."""

    def __init__(self, data: bytes, at: int) -> None:
        self.data, self.at = data, at

    def readable(self) -> bool:
        return True

    def readinto(self, view) -> int:
        chunk = self.data[self.at : self.at + min(len(view), 7)]  # short reads, as a network gives
        view[: len(chunk)] = chunk
        self.at += len(chunk)
        return len(chunk)


SPANS = [(0, 5), (9, 10), (20, 4000), (4096, 9000), (9990, 10_000)]


@pytest.mark.parametrize("kind", ["native", "python", "stream"])
def test_the_spans_bytes_come_out_end_to_end_and_nothing_else(tmp_path, kind):
    if kind == "native" and _native_gather is None:
        pytest.skip("the C gather is not built")
    data = bytes(range(256)) * 40  # 10,240 bytes, each telling its place mod 256
    path = tmp_path / "shard.tar"
    path.write_bytes(data)
    open_at = (lambda b: Unmappable(data, b)) if kind == "stream" else _opener(path)
    stream = KeptBytes(open_at, SPANS, native=kind == "native")
    got = bytearray()
    buffer = bytearray(1000)  # smaller than a span: a span goes on across reads
    while count := stream.readinto(buffer):
        got += buffer[:count]
    stream.close()
    assert bytes(got) == b"".join(data[a:b] for a, b in SPANS)


@pytest.mark.parametrize("native", [True, False])
def test_a_span_past_the_files_end_stops_there(tmp_path, native):
    if native and _native_gather is None:
        pytest.skip("the C gather is not built")
    path = tmp_path / "short.tar"
    path.write_bytes(b"x" * 100)
    stream = KeptBytes(_opener(path), [(10, 20), (90, 150), (160, 170)], native=native)
    assert stream.read() == b"x" * 20  # 10 of the first span, the 10 the second has; then the end


def test_the_c_gather_refuses_a_span_that_is_no_byte_range():
    if _native_gather is None:
        pytest.skip("the C gather is not built")
    from array import array

    with pytest.raises(ValueError, match="not a byte range"):
        _native_gather(b"abc", bytearray(3), array("q", [2, 1]), 0, 0, 0)
