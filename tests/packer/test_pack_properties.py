"""Invariants over random inputs: pack then read gives back the same bytes; caps hold; counts add up."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from packer import PackOptions, pack, verify_dataset
from shardstream.format import DatasetIndex
from tests.conftest import expected_from_directory, read_with_tarfile

segment = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,12}", fullmatch=True)
keys = st.lists(segment, min_size=1, max_size=3).map("/".join)
extensions = st.sampled_from(["jpg", "txt", "json", "cls", "wav", "tar.gz", "0.png", "npy"])
members = st.dictionaries(extensions, st.binary(max_size=3000), min_size=1, max_size=3)
samples = st.dictionaries(keys, members, min_size=1, max_size=25)


def _write(root: Path, corpus: dict[str, dict[str, bytes]]) -> None:
    for key, members in corpus.items():
        for ext, data in members.items():
            path = root / f"{key}.{ext}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(samples, st.integers(4096, 20_000), st.one_of(st.none(), st.integers(1, 6)), st.integers(1, 2))
def test_pack_then_read_gives_back_the_same_bytes(corpus, max_size, max_count, workers):
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "src", Path(tmp) / "out"
        src.mkdir()
        _write(src, corpus)
        # A key that is also a folder name ("a" and "a/b") is legal; the truth comes from the files.
        expected = expected_from_directory(src)
        summary = pack(src, out, PackOptions(max_size=max_size, max_count=max_count, workers=workers))
        index = DatasetIndex.load(summary.index)
        shards = [out / entry.name for entry in index.shards]
        assert read_with_tarfile(shards) == expected
        assert index.samples == len(expected) == summary.samples
        for entry in index.shards:
            assert entry.size <= max_size or entry.samples == 1
            assert max_count is None or entry.samples <= max_count
        assert summary.oversized == sum(1 for e in index.shards if e.size > max_size)
        assert verify_dataset(Path(summary.index)) == []
