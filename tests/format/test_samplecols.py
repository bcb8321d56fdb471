"""Per-sample columns files (format/samplecols.py) and their declaration in the index: round trips, and
every damage a FormatError naming the file."""

from __future__ import annotations

import json
import struct
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardstream.errors import FormatError
from shardstream.format import DatasetIndex, ShardEntry, decode_sample_columns, encode_sample_columns
from shardstream.format.samplecols import DESCRIPTOR, DTYPES, HEADER, sample_columns_name
from shardstream.format.sidecars import sample_columns_sidecar

SRC = "data/train-000000.tar.cols"


def _decode(data: bytes, samples: int | None = 3) -> dict[str, np.ndarray]:
    return decode_sample_columns(data, source=SRC, samples=samples)


def _damaged(match: str, data: bytes, samples: int | None = 3) -> None:
    with pytest.raises(FormatError, match=match) as caught:
        _decode(data, samples)
    assert SRC in str(caught.value)


@pytest.mark.parametrize("code", DTYPES)
def test_every_dtype_round_trips_without_a_copy(code: str) -> None:
    values = np.array([0, 1, 2, 7], dtype="<" + code)
    data = encode_sample_columns({"x": values, "cost": [3, 0, 9, 1]}, {"cost": "u4"})
    out = decode_sample_columns(data, source=SRC, samples=4)
    assert list(out) == ["x", "cost"] and out["x"].dtype == np.dtype("<" + code)
    assert out["x"].tolist() == values.tolist() and out["cost"].tolist() == [3, 0, 9, 1]
    assert not out["x"].flags.writeable and not out["x"].flags.owndata  # a view over the file's bytes
    assert out["x"].ctypes.data % 8 == 0 or len(data) % 8  # each array on an 8-byte boundary of the file
    assert (out["cost"].ctypes.data - out["x"].ctypes.data) % 8 == 0


def test_names_follow_the_shard_and_the_sidecars_folder() -> None:
    assert sample_columns_name("train-000001.tar") == "train-000001.tar.cols"
    assert sample_columns_sidecar("https://h/a/train-000001.tar").startswith("train-000001.tar-")
    assert sample_columns_sidecar("a/x.tar").endswith(".cols")


def test_layout_is_the_documented_one() -> None:
    data = encode_sample_columns({"cost": [1, 2, 3]}, {"cost": "u2"})
    assert data[:8] == b"SSSAMPLE"
    assert struct.unpack_from("<IIQ", data, 8) == (1, 1, 3)
    assert data[24:56] == b"cost".ljust(24, b"\0") + b"u2".ljust(8, b"\0")
    assert data[56:] == struct.pack("<3H", 1, 2, 3)


GOOD = encode_sample_columns({"cost": [5, 6, 7], "score": [0.5, 0.25, 1.0]}, {"cost": "u4"})


def test_truncated_and_extended_files() -> None:
    for cut in (0, 10, 23, 24, 40, len(GOOD) - 1):
        with pytest.raises(FormatError) as caught:
            _decode(GOOD[:cut])
        assert SRC in str(caught.value)
    _damaged("truncated or padded", GOOD + b"\0")
    _damaged("truncated or padded", GOOD + bytes(8))


def test_header_damage() -> None:
    _damaged("not a sample columns file", b"XXSAMPLE" + GOOD[8:])
    _damaged("layout 2", GOOD[:8] + struct.pack("<I", 2) + GOOD[12:])
    _damaged("holds 3 samples, the index says 4", GOOD, samples=4)


def _with_descriptor(i: int, name: bytes, code: bytes) -> bytes:
    at = HEADER.size + DESCRIPTOR.size * i
    return GOOD[:at] + DESCRIPTOR.pack(name, code) + GOOD[at + DESCRIPTOR.size :]


def test_bad_names_dtypes_and_duplicates() -> None:
    _damaged("column name 'Cost'", _with_descriptor(0, b"Cost", b"u4"))
    _damaged("column name ''", _with_descriptor(0, b"", b"u4"))
    _damaged("NUL inside", _with_descriptor(0, b"co\0st", b"u4"))
    _damaged("not ASCII", _with_descriptor(0, "cöst".encode(), b"u4"))
    _damaged("dtype 'u3'", _with_descriptor(1, b"score", b"u3"))
    _damaged("dtype 'f16'", _with_descriptor(1, b"score", b"f16"))
    _damaged("must be an integer dtype", _with_descriptor(0, b"cost", b"f4"))
    _damaged("appears twice", _with_descriptor(1, b"cost", b"u8"))


def test_negative_cost_is_damage() -> None:
    data = encode_sample_columns({"cost": [4, 2, 1]}, {"cost": "i4"})
    hostile = data[:-8] + struct.pack("<i", -2) + data[-4:]
    _damaged("holds -2 at sample 1", hostile)


def test_huge_declared_counts_on_a_tiny_file_allocate_nothing() -> None:
    huge_samples = HEADER.pack(b"SSSAMPLE", 1, 1, 2**62) + DESCRIPTOR.pack(b"cost", b"u8")
    huge_columns = HEADER.pack(b"SSSAMPLE", 1, 2**32 - 1, 3)
    tracemalloc.start()
    try:
        _damaged("header describes", huge_samples, samples=None)
        _damaged("cannot hold the 4294967295 columns", huge_columns)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_encode_refuses_bad_columns_with_valueerror() -> None:
    for columns, dtypes, match in [
        ({"cost": [1, -1]}, None, "costs are >= 0"),
        ({"cost": [1.5]}, None, "'cost' must be an integer dtype"),
        ({"cost": [1.0]}, {"cost": "u4"}, "holds floats"),
        ({"cost": [True]}, None, "not numbers"),
        ({"x": [300]}, {"x": "u1"}, "outside u1"),
        ({"x": [1], "y": [1, 2]}, None, "different lengths"),
        ({"bad-name": [1]}, None, "column name"),
        ({"x": [1]}, {"x": "u3"}, "dtype 'u3'"),
    ]:
        with pytest.raises(ValueError, match=match):
            encode_sample_columns(columns, dtypes)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 40).flatmap(
        lambda n: st.dictionaries(
            st.from_regex(r"[a-z0-9_]{1,24}", fullmatch=True),
            st.tuples(st.sampled_from(DTYPES), st.lists(st.integers(0, 100), min_size=n, max_size=n)),
            max_size=5,
        ).map(lambda cols: (n, cols))
    )
)
def test_encode_decode_round_trip(case: tuple[int, dict[str, tuple[str, list[int]]]]) -> None:
    n, cols = case
    columns = {name: values for name, (_, values) in cols.items()}
    dtypes = {name: code for name, (code, _) in cols.items() if name != "cost" or code[0] != "f"}
    if "cost" in cols and cols["cost"][0][0] == "f":
        dtypes["cost"] = "u8"
    data = encode_sample_columns(columns, dtypes)
    out = decode_sample_columns(data, source=SRC, samples=n if cols else 0)
    assert list(out) == list(columns)
    for name, values in columns.items():
        assert out[name].dtype == np.dtype("<" + dtypes[name]) and out[name].tolist() == values
    assert encode_sample_columns(out, dtypes) == data


def _index_doc(**extra: object) -> str:
    index = DatasetIndex(
        pattern=None, shards=[ShardEntry("a.tar", 2, 3072, ""), ShardEntry("b.tar", 1, 2048, "")]
    )
    doc = json.loads(index.to_json())
    doc.update(extra)
    return json.dumps(doc)


def test_index_declares_columns_and_sums_only_when_set(tmp_path) -> None:
    shards = [ShardEntry("a.tar", 2, 3072, ""), ShardEntry("b.tar", 1, 2048, "")]
    plain = DatasetIndex(pattern=None, shards=shards)
    assert "sample_columns" not in plain.to_json() and "column_sums" not in plain.to_json()
    index = DatasetIndex(
        pattern=None, shards=shards, sample_columns={"cost": "u8"}, column_sums={"cost": [10, 4]}
    )
    for columns in (False, True):
        index.save(tmp_path / "i.json", columns=columns)
        back = DatasetIndex.load(tmp_path / "i.json")
        assert back.sample_columns == {"cost": "u8"} and back.column_sums == {"cost": [10, 4]}


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"sample_columns": {"Cost": "u8"}}, "column name"),
        ({"sample_columns": {"cost": "f4"}}, "integer dtype"),
        ({"sample_columns": {"x": "q8"}}, "dtype 'q8'"),
        ({"sample_columns": []}, "must be objects"),
        ({"sample_columns": {"cost": "u8"}, "column_sums": {"cost": [1]}}, "1 sums for 2 shards"),
        ({"sample_columns": {"cost": "u8"}, "column_sums": {"cost": [1, -1]}}, "holds -1"),
        ({"sample_columns": {"cost": "u8"}, "column_sums": {"cost": [1, True]}}, "holds True"),
        ({"sample_columns": {"cost": "u8"}, "column_sums": {"cost": [1, 2.5]}}, "holds 2.5"),
        ({"column_sums": {"cost": [1, 2]}}, "not a declared integer column"),
        ({"sample_columns": {"s": "f4"}, "column_sums": {"s": [1, 2]}}, "not a declared integer column"),
    ],
)
def test_index_refuses_bad_declarations(extra: dict[str, object], match: str) -> None:
    with pytest.raises(FormatError, match=match):
        DatasetIndex.from_json(_index_doc(**extra), source="idx.json")
