"""Windows of ids (streamer/mixture/fetch.py): a mixture's source of large samples holds their ids and reads
each as it leaves, through its own fields; the stream is the one windows of bytes give, sample for sample."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from packer import PackOptions, pack
from streamer import Mixture


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """Two sources of 20-30 KB samples (two members each), in shards of 25 samples."""
    root = tmp_path_factory.mktemp("large")
    out = []
    for name in ("a", "b"):
        raw = root / f"raw-{name}"
        raw.mkdir()
        for i in range(60):
            (raw / f"{name}{i:03d}.bin").write_bytes(os.urandom(20_000 + 150 * i))
            (raw / f"{name}{i:03d}.txt").write_bytes(f"{name} {i}".encode())
        out.append(pack(raw, root / name, PackOptions(prefix=name, max_count=25)).index)
    return out


def _read_bytes() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def _mixture(large, **options) -> Mixture:
    sources = [
        {"path": large[0], "weight": 2, "decode": False, "fields": ["bin"]},
        {"path": large[1], "weight": 1, "decode": False},
    ]
    return Mixture(sources, epoch_size=90, buffer_size=60, seed=8, **options)


def test_windows_of_ids_give_the_samples_windows_of_bytes_give_with_each_sources_fields(large):
    def stream(defer_reads):
        return [
            (s["__source__"], s["__key__"], {k: bytes(v) for k, v in s.items() if not k.startswith("__")})
            for s in _mixture(large, defer_reads=defer_reads)
        ]

    ids = stream(None)  # large samples: deferred by default
    assert ids == stream(False) == stream(True) and len({key for _, key, _ in ids}) == 90
    assert {tuple(members) for source, _, members in ids if source == "a"} == {("bin",)}
    assert {tuple(sorted(members)) for source, _, members in ids if source == "b"} == {("bin", "txt")}


def test_the_first_sample_of_a_mixture_of_large_samples_reads_one_sample_not_its_windows(large):
    read = {}
    for defer_reads in (None, False) * 2:  # the second round: every module is loaded
        before = _read_bytes()
        next(iter(_mixture(large, defer_reads=defer_reads)))
        read[defer_reads] = _read_bytes() - before
    assert read[False] > 30 * 20_000  # two windows of bytes (40 + 20 samples)
    assert read[None] < 300_000  # indexes, sidecars and one sample


def test_a_restored_mixture_of_large_samples_continues_exactly(large):
    full = [s["__key__"] for s in _mixture(large)]
    for stop in (0, 1, 31, 89):
        head = _mixture(large)
        stream = iter(head)
        keys = [next(stream)["__key__"] for _ in range(stop)]
        restored = _mixture(large)
        restored.load_state_dict(head.state_dict())
        assert keys + [s["__key__"] for s in restored] == full, stop


def test_a_mixture_of_small_samples_has_no_fetch_stage(tmp_path, large):
    """By the size rule a source decides by the first shard of its run; a mixture none of whose sources
    defers has no fetch stage (it cost a mixture of small samples 4-8%)."""
    from tests.conftest import write_dataset

    small = write_dataset(tmp_path / "small", [40, 40]).parent
    stages = {}
    for name, paths in (("small", [small, small]), ("mixed", [small, large[0]])):
        sources = [
            {"path": str(p), "name": f"s{j}", "weight": 1, "decode": False} for j, p in enumerate(paths)
        ]
        mixture = Mixture(sources, epoch_size=40, buffer_size=20, seed=1)
        iter(mixture)
        stages[name] = type(mixture._chain[0]).__name__
    assert stages == {"small": "MixtureReader", "mixed": "Fetch"}
