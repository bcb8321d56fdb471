"""Keys to sample masks through real packed datasets' key files: every sample of a repeated key, missing keys
counted, blocks past the first, key files read from text, Parquet and Python sets; a dataset without a key
file refused with the command that writes one."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from packer import PackOptions, pack
from shardstream.errors import FormatError
from shardstream.subset import key_masks, read_keys
from tests.conftest import write_dataset

PER_SHARD = 20
DUPLICATE = "k005"  # held by a sample in shard 0 and by another in shard 2


def pack_costed(root: Path) -> Path:
    """3 shards x 20 samples, ids k000..k058 with k005 once more in shard 2, cost = 10 x its number (the
    repeat: 7); the packed folder, with its key file and .cols sidecars."""
    records = [{"id": f"k{i:03d}", "n": 10 * i} for i in range(59)]
    records.insert(45, {"id": DUPLICATE, "n": 7})
    root.mkdir(parents=True, exist_ok=True)
    (root / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    pack(root / "m.jsonl", root / "shards", PackOptions(cost="n", max_count=PER_SHARD))
    return root / "shards"


def places(folder: Path) -> list[tuple[int, int, str, int]]:
    """(shard, sample, key, cost) of every sample, read straight from the tars in order."""
    out = []
    for shard, path in enumerate(sorted(folder.glob("*.tar"))):
        with tarfile.open(path) as tar:
            for sample, member in enumerate(m for m in tar if m.name.endswith(".json")):
                record = json.loads(tar.extractfile(member).read())
                out.append((shard, sample, member.name[: -len(".json")], record["n"]))
    return out


@pytest.fixture(scope="module")
def costed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pack_costed(tmp_path_factory.mktemp("keys"))


def test_the_fixture_is_what_the_tests_assume(costed):
    found = places(costed)
    assert [s for s, *_ in found].count(2) == PER_SHARD and len(found) == 60
    assert [(s, i) for s, i, key, _ in found if key == DUPLICATE] == [(0, 5), (2, 5)]


def test_every_sample_of_a_repeated_key_matches_and_missing_keys_are_counted(costed):
    keys = [DUPLICATE, "k001", "k058", "nope", "a", "zzz", "k001"]  # a repeat given: one key
    match = key_masks(costed, keys)
    expected = sorted((s, i) for s, i, key, _ in places(costed) if key in keys)
    assert list(zip(match.shards.tolist(), match.samples.tolist(), strict=True)) == expected
    assert (match.keys, match.found, match.missing, match.matched) == (6, 3, 3, 4)
    assert match.missing_shown == ("a", "nope", "zzz")
    assert match.matched_shards().tolist() == [0, 2]
    mask = match.mask(2, PER_SHARD)
    assert mask.dtype == bool and np.flatnonzero(mask).tolist() == [5, 19]
    assert match.mask(1, PER_SHARD) is None


def test_keys_past_the_first_block_are_found_and_absent_blocks_are_not_read(tmp_path):
    records = [{"id": f"b{i:05d}", "n": i} for i in range(8000)]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    pack(tmp_path / "m.jsonl", tmp_path / "shards", PackOptions(max_count=2000))
    idx = (tmp_path / "shards" / "shardstream-keys.idx").read_bytes()
    assert idx.count(b"\n") > 3, "the key file must span several blocks for this test"
    wanted = ["b00000", "b03999", "b04000", "b07999", "b07999x", "b0", "c"]
    match = key_masks(tmp_path / "shards", wanted)
    assert list(zip(match.shards.tolist(), match.samples.tolist(), strict=True)) == [
        (0, 0),
        (1, 1999),
        (2, 0),
        (3, 1999),
    ]
    assert match.missing == 3 and match.found == 4


def test_key_files_in_text_parquet_and_python_sets(tmp_path):
    text = tmp_path / "keys.txt"
    text.write_bytes(b"k001\r\n\nk002\n  \nk003")
    assert list(read_keys(text)) == ["k001", "k002", "  ", "k003"]
    assert sorted(read_keys({"b", "a"})) == ["a", "b"]
    pyarrow = pytest.importorskip("pyarrow")
    parquet = pytest.importorskip("pyarrow.parquet")

    one = tmp_path / "one.parquet"
    parquet.write_table(pyarrow.table({"id": ["x", "y"], "score": [1, 2]}), one)
    assert list(read_keys(one)) == ["x", "y"]
    two = tmp_path / "two.parquet"
    parquet.write_table(pyarrow.table({"id": ["x"], "url": ["u"]}), two)
    assert list(read_keys(two, column="url")) == ["u"]
    with pytest.raises(ValueError, match=r"two.parquet: 2 string columns \(id, url\).*column="):
        list(read_keys(two))
    with pytest.raises(ValueError, match=r"column='score' is not one of its string columns: id"):
        list(read_keys(one, column="score"))


def test_a_missing_keys_file_and_a_non_string_key_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"absent.txt: no such keys file"):
        list(read_keys(tmp_path / "absent.txt"))
    with pytest.raises(ValueError, match=r"keys: 5 is a int, not a str"):
        list(read_keys(["a", 5]))


def test_a_dataset_without_a_key_file_says_how_to_write_one(tmp_path):
    index = write_dataset(tmp_path / "plain", [3, 3])
    with pytest.raises(FormatError, match=r"no key file.*`shardstream index .*plain`"):
        key_masks(index, {"s000-00001"})
