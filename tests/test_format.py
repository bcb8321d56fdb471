"""The shard format: key rule, brace patterns, hand-written tar headers, offsets, index."""

from __future__ import annotations

import io
import subprocess
import tarfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from packer.errors import FormatError, KeyRuleError, ShardReadError
from packer.format import (
    BracePattern,
    DatasetIndex,
    ShardEntry,
    check_key,
    decode_offsets,
    encode_offsets,
    end_of_archive,
    member_header,
    member_size,
    shard_pattern,
    split_member_name,
)
from packer.format.tarheader import padded
from packer.format.tarread import iter_samples


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


@given(st.integers(1, 10**7), st.integers(3, 8))
def test_shard_pattern_expands_to_count(count, digits):
    if count > 10**digits:
        return
    pattern = BracePattern(shard_pattern("train", count, digits))
    assert len(pattern) == count
    assert pattern[count - 1] == f"train-{count - 1:0{digits}d}.tar"


def test_bad_patterns_raise_format_error():
    with pytest.raises(FormatError):
        BracePattern("a{0..3")
    with pytest.raises(FormatError):
        BracePattern("a{{0..3}}")


names = st.one_of(
    st.from_regex(r"[a-z0-9_/-]{1,40}\.[a-z0-9]{1,5}", fullmatch=True),
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=300).map(
        lambda s: s.replace("\0", "x") + ".bin"
    ),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(names, st.binary(max_size=2000)), min_size=1, max_size=6))
def test_hand_written_headers_read_back_with_tarfile_and_our_reader(members):
    archive = io.BytesIO()
    expected_size = 0
    for name, data in members:
        header = member_header(name, len(data))
        archive.write(header + data + b"\0" * padded(len(data)))
        expected_size += member_size(name, len(data))
    archive.write(end_of_archive())
    assert len(archive.getvalue()) == expected_size + 1024
    archive.seek(0)
    with tarfile.open(fileobj=archive, mode="r:") as tar:
        got = [(m.name, tar.extractfile(m).read()) for m in tar.getmembers()]
    assert got == list(members)
    archive.seek(0)
    assert list(iter_samples(archive, url="u")) == _grouped(members, "u")


def _grouped(members, url):
    """Consecutive members with one key make one sample (a repeated extension keeps the last data)."""
    samples = []
    for name, data in members:
        key, ext = split_member_name(name)
        if not samples or samples[-1]["__key__"] != key:
            samples.append({"__key__": key, "__url__": url})
        samples[-1][ext] = data
    return samples


def _names(samples):
    return [f"{s['__key__']}.{ext}" for s in samples for ext in s if not ext.startswith("__")]


def test_spans_give_each_samples_byte_range_and_ends_split_samples_early():
    archive = b"".join(
        member_header(name, 3) + b"abc" + b"\0" * padded(3) for name in ("a.jpg", "a.txt", "b.jpg")
    ) + end_of_archive()
    spans = []
    assert _names(iter_samples(io.BytesIO(archive), spans=spans)) == ["a.jpg", "a.txt", "b.jpg"]
    assert spans == [(0, 2048), (2048, 3072)]
    # With ends, a sample is complete at its end byte, whatever the next member's key.
    split = list(iter_samples(io.BytesIO(archive), ends=[1024, 2048, 3072]))
    assert [sorted(s) for s in split] == [["__key__", "__url__", "jpg"], ["__key__", "__url__", "txt"],
                                          ["__key__", "__url__", "jpg"]]  # fmt: skip


def test_headers_are_readable_by_gnu_tar(tmp_path):
    path = tmp_path / "x.tar"
    long_name = "d/" * 70 + "long.txt"
    with open(path, "wb") as handle:
        for name in ("a/b.txt", long_name, "ünï/cödé.txt"):
            handle.write(member_header(name, 3) + b"abc" + b"\0" * 509)
        handle.write(end_of_archive())
    listed = subprocess.run(["tar", "tf", str(path)], capture_output=True, text=True, check=True).stdout
    assert listed.splitlines() == ["a/b.txt", long_name, "ünï/cödé.txt"]


def test_reader_names_offset_of_truncation_and_corruption():
    good = member_header("k.txt", 600) + b"x" * 600 + b"\0" * padded(600)
    with pytest.raises(ShardReadError, match=r"u member 'k.txt' at byte 0: truncated"):
        list(iter_samples(io.BytesIO(good[:900]), url="u"))
    damaged = bytearray(good + member_header("k2.txt", 1) + b"y" + b"\0" * 511)
    damaged[1536 + 10] ^= 0xFF
    with pytest.raises(ShardReadError, match="at byte 1536: corrupt tar header"):
        list(iter_samples(io.BytesIO(bytes(damaged)), url="u"))


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

    from packer.errors import MediaError, RejectedInput

    for error in (
        RejectedInput("a.jsonl:record 3", "missing file"),
        MediaError("x.jpg", "image does not decode"),
        ShardReadError("truncated", url="http://h/s.tar", member="k.jpg", offset=1536),
    ):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error)


@pytest.mark.parametrize("checksum_field", [b"%06o\0 ", b"%07o\0", b" %05o\0 "])
def test_reader_accepts_every_common_checksum_spelling(checksum_field):
    header = bytearray(member_header("k.txt", 1))
    header[148:156] = b" " * 8
    value = sum(header)
    header[148:156] = (checksum_field.decode() % value).encode()
    archive = bytes(header) + b"x" + b"\0" * 511 + end_of_archive()
    assert _names(iter_samples(io.BytesIO(archive))) == ["k.txt"]
