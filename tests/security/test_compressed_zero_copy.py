"""``zero_copy=True`` over ``.tar.gz`` shards (issue 32, item 14): compressed shards cannot be mapped, so they
are read the copying way, and give the samples the default reading gives; before, the reader mapped the
compressed file and failed every shard with "truncated tar header"."""

from __future__ import annotations

import gzip

import pytest

from shardstream.format import shard_pattern
from streamer import ShardDataset
from tests.conftest import write_dataset

pytestmark = pytest.mark.timeout(60)


def test_zero_copy_reads_compressed_shards_by_copying_them(tmp_path):
    write_dataset(tmp_path, [5, 7], payload=200)
    for tar in sorted(tmp_path.glob("*.tar")):
        (tmp_path / f"{tar.name}.gz").write_bytes(gzip.compress(tar.read_bytes()))
    pattern = str(tmp_path / shard_pattern("train", 2)) + ".gz"

    def members(**options):
        dataset = ShardDataset(pattern, decode=False, shuffle=False, **options)
        return [(s["__key__"], {k: bytes(v) for k, v in s.items() if k[:2] != "__"}) for s in dataset]

    copied = members()
    assert len(copied) == 12
    assert members(zero_copy=True) == copied
