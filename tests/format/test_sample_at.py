"""``sample_at`` (_tarscan.c): one sample's members in one C call, for the deferred reader
(streamer/chain/deferred.py). It must give exactly the general reader's sample, or decline (None) and let the
general reader decide; and it must not decline the plain samples our packer writes."""

from __future__ import annotations

import io

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from shardstream.errors import ShardReadError
from shardstream.format import member_header
from shardstream.format.tarheader import padded
from shardstream.format.tarread import iter_samples

_tarscan = pytest.importorskip("shardstream.format._tarscan", reason="_tarscan.c is not built")

keys = st.sampled_from(["a", "b.c/d", "x/y/z", "é"])
exts = st.from_regex(r"[a-z0-9]{0,4}(\.[a-z]{1,3})?", fullmatch=True)
long_names = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=90, max_size=200)


def _archive(names: list[str], datas: list[bytes]) -> bytes:
    pairs = zip(names, datas, strict=True)
    return b"".join(member_header(name, len(data)) + data + bytes(padded(len(data))) for name, data in pairs)


def _general(span: bytes) -> list[dict] | None:
    """The general reader's samples of the span, or None where it names damage."""
    try:
        return list(iter_samples(io.BytesIO(span), url="u"))
    except ShardReadError:
        return None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(keys, exts, st.binary(max_size=1500)), min_size=1, max_size=5),
    st.one_of(st.none(), long_names),
    st.integers(0, 1100),
    st.booleans(),
)
def test_a_sample_is_the_general_readers_or_declined(members, long_key, cut, as_view):
    names = [
        f"{long_key if long_key and i == 0 else key}.{ext}" if ext else key
        for i, (key, ext, _) in enumerate(members)
    ]
    archive = _archive(names, [data for _, _, data in members])
    stop = max(0, len(archive) - cut)
    got = _tarscan.sample_at(archive, memoryview(archive) if as_view else archive, 0, stop, "u")
    event("declined" if got is None else "read")
    if got is None:
        one_key = len({name.split(".")[0] for name in names}) == 1 and "/" not in "".join(names)
        plain = all(len(name.encode()) <= 100 and name.isascii() for name in names)
        assert not (one_key and plain and cut == 0), "declined a plain sample our packer writes"
        return
    assert all(type(value) is (memoryview if as_view else bytes) for k, value in got.items() if k[:2] != "__")
    assert _general(archive[:stop]) == [{k: bytes(v) if k[:2] != "__" else v for k, v in got.items()}]


def test_a_span_of_two_keys_or_cut_inside_a_member_is_declined():
    archive = _archive(["k1.jpg", "k1.cls", "k2.jpg"], [b"x" * 600, b"7", b"y"])
    two_members = len(archive) - 1024
    first = _tarscan.sample_at(archive, archive, 0, two_members, "u")
    assert first == {"__key__": "k1", "__url__": "u", "jpg": b"x" * 600, "cls": b"7"}
    assert _tarscan.sample_at(archive, archive, 0, len(archive), "u") is None  # two keys
    assert _tarscan.sample_at(archive, archive, 0, two_members - 512, "u") is None  # cut inside k1.cls
    assert _tarscan.sample_at(archive, archive, 0, 300, "u") is None  # not even a header
    assert _tarscan.sample_at(archive, archive, two_members, len(archive), "u")["__key__"] == "k2"
    damaged = bytearray(archive)
    damaged[10] ^= 1  # k1.jpg's name: its checksum no longer holds
    assert _tarscan.sample_at(bytes(damaged), archive, 0, two_members, "u") is None


def test_a_span_past_the_buffer_is_declined_not_read():
    archive = _archive(["k.txt"], [b"abc"])
    assert _tarscan.sample_at(archive, archive, 0, len(archive) + 512, "u") is None
    assert _tarscan.sample_at(archive, archive, -512, len(archive), "u") is None
    with pytest.raises(TypeError):
        _tarscan.sample_at(archive, archive, 0, len(archive))
