"""The shard format: key rule, brace patterns, hand-written tar headers, offsets, index."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardstream.errors import FormatError, KeyRuleError, ShardReadError
from shardstream.format import (
    BracePattern,
    DatasetIndex,
    ShardEntry,
    check_key,
    decode_offsets,
    encode_offsets,
    end_of_archive,
    member_header,
    shard_pattern,
    split_member_name,
)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("a/b/0001.jpg", ("a/b/0001", "jpg")),
        ("a.b/c.d.e", ("a.b/c", "d.e")),
        ("x/0001.0.jpg", ("x/0001", "0.jpg")),
        ("noext", ("noext", "")),
    ],
)
def test_split_member_name_follows_webdataset(name, expected):
    assert split_member_name(name) == expected


@pytest.mark.parametrize("bad", ["", "/abs", "a/../b", "a//b", "x.y", "dir/x.y", "a\nb", "a\\b", "./a"])
def test_check_key_rejects_keys_that_do_not_read_back(bad):
    with pytest.raises(KeyRuleError):
        check_key(bad)


def test_dotted_key_message_names_the_split_and_the_fix():
    with pytest.raises(KeyRuleError, match=r"'img\.v2'.*'img'.*--key-field"):
        check_key("img.v2")


def test_brace_pattern_is_random_access_and_constant_memory():
    pattern = BracePattern("train-{0000000..9999999}.tar")
    assert len(pattern) == 10_000_000
    assert pattern[0] == "train-0000000.tar"
    assert pattern[1234567] == "train-1234567.tar"
    assert pattern[-1] == "train-9999999.tar"
    with pytest.raises(IndexError):
        pattern[10_000_000]


def test_brace_pattern_lists_and_products_match_bash_order():
    assert list(BracePattern("s{a,b}-{1..3}")) == ["sa-1", "sa-2", "sa-3", "sb-1", "sb-2", "sb-3"]
    assert list(BracePattern("x{3..1}")) == ["x3", "x2", "x1"]
    assert list(BracePattern("plain.tar")) == ["plain.tar"]
    assert list(BracePattern("y{0..4..2}")) == ["y0", "y2", "y4"]
    # Zero padding follows bash: the widest end sets the width.
    assert BracePattern("z{00..100}")[0] == "z000"


@st.composite
def _counts_and_digits(draw):
    """Only valid pairs (count <= 10**digits), so no example is drawn to be thrown away."""
    digits = draw(st.integers(3, 8))
    return draw(st.integers(1, min(10**7, 10**digits))), digits


@given(_counts_and_digits())
def test_shard_pattern_expands_to_count(case):
    count, digits = case
    pattern = BracePattern(shard_pattern("train", count, digits))
    assert len(pattern) == count
    assert pattern[count - 1] == f"train-{count - 1:0{digits}d}.tar"


def test_bad_patterns_raise_format_error():
    with pytest.raises(FormatError):
        BracePattern("a{0..3")
    with pytest.raises(FormatError):
        BracePattern("a{{0..3}}")


def test_headers_are_readable_by_gnu_tar(tmp_path):
    path = tmp_path / "x.tar"
    long_name = "d/" * 70 + "long.txt"
    with open(path, "wb") as handle:
        for name in ("a/b.txt", long_name, "ünï/cödé.txt"):
            handle.write(member_header(name, 3) + b"abc" + b"\0" * 509)
        handle.write(end_of_archive())
    listed = subprocess.run(["tar", "tf", str(path)], capture_output=True, text=True, check=True).stdout
    assert listed.splitlines() == ["a/b.txt", long_name, "ünï/cödé.txt"]


def test_offsets_round_trip_and_validation():
    data = encode_offsets([0, 1536, 4096])
    assert list(decode_offsets(data, samples=2)) == [0, 1536, 4096]
    with pytest.raises(FormatError, match="holds 2 samples, the index says 3"):
        decode_offsets(data, samples=3)
    with pytest.raises(FormatError):
        decode_offsets(data[:-1])


def test_index_round_trip_is_compact(tmp_path):
    shards = [ShardEntry(f"train-{i:06d}.tar", 1000, 256_000_000, "ab" * 32) for i in range(1000)]
    index = DatasetIndex("train-{000000..000999}.tar", shards, {"jpg": 10**6}, {"max_size": 256_000_000})
    index.save(tmp_path / "i.json")
    size = (tmp_path / "i.json").stat().st_size
    assert size < 1000 * 120 + 1000
    loaded = DatasetIndex.load(tmp_path / "i.json")
    assert (
        loaded.shards == shards
        and loaded.samples == 10**6
        and list(loaded.sample_counts())[:2] == [1000, 1000]
    )


def test_index_rejects_other_files_and_versions(tmp_path):
    with pytest.raises(FormatError, match="not a shardstream index"):
        DatasetIndex.from_json('{"shards": []}')
    with pytest.raises(FormatError, match="version 99"):
        DatasetIndex.from_json('{"format": "shardstream", "version": 99}')


def test_errors_survive_pickling_across_processes():
    import pickle

    from shardstream.errors import DecodeError, MediaError, MissingMemberError, RejectedInput

    for error in (
        RejectedInput("a.jsonl:record 3", "missing file"),
        MediaError("x.jpg", "image does not decode"),
        ShardReadError("truncated", url="http://h/s.tar", member="k.jpg", offset=1536),
        DecodeError("does not decode: broken data stream", url="http://h/s.tar", member="k.jpg", offset=512),
        MissingMemberError("sample has no member 'cls'", url="/d/s.tar", member="k.cls"),
    ):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error)
        for field in ("url", "member", "offset", "source", "reason"):
            assert getattr(copy, field, None) == getattr(error, field, None)


def test_stream_errors_say_where_and_keep_their_kinds_apart():
    from shardstream.errors import DecodeError, MissingMemberError, StreamError

    missing = MissingMemberError("sample has no member 'cls'", url="/d/s.tar", member="k.cls")
    assert isinstance(missing, KeyError)
    assert str(missing) == "/d/s.tar member 'k.cls': sample has no member 'cls'"  # not quoted like a KeyError
    decode = DecodeError("does not decode: truncated", url="/d/s.tar", member="k.jpg")
    assert not isinstance(decode, ShardReadError) and isinstance(decode, StreamError)
    located = decode.located(4096)
    assert (
        type(located) is DecodeError
        and located.offset == 4096
        and str(located).endswith("member 'k.jpg' at byte 4096: does not decode: truncated")
    )
    assert located.located(1) is located  # a known offset is kept


def test_an_offsets_sidecar_that_goes_backwards_or_miscounts_is_refused_naming_it():
    from shardstream.format.offsets import decode_offsets, encode_offsets

    assert list(decode_offsets(encode_offsets([0, 512, 512, 2048]), samples=3)) == [0, 512, 512, 2048]
    for data, named in [
        (encode_offsets([0, 1024, 512, 2048]), "not increasing"),
        (encode_offsets([0, 512])[:-1], "multiple of 8"),
        (encode_offsets([0, 512, 1024]), "index says 3"),
    ]:
        with pytest.raises(FormatError, match=rf"a-000001\.tar\.offsets: .*{named}"):
            decode_offsets(data, source="a-000001.tar.offsets", samples=3)
