"""Shared fixtures: a real synthetic corpus on disk, and helpers that read shards back independently."""

from __future__ import annotations

import json
import os
import tarfile
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from shardstream_cli.demo.synth import Corpus, make_corpus


def pytest_configure(config: pytest.Config) -> None:
    # The node's metadata cache (HttpOptions.metadata_cache) in this run's own folder, not in ~/.cache.
    os.environ.setdefault("SHARDSTREAM_CACHE", tempfile.mkdtemp(prefix="shardstream-tests-"))


SHARED = Path(__file__).resolve().parents[2] / "shared"
# DataLoader worker start methods: fork is Linux's default before Python 3.14, forkserver from 3.14, spawn
# is macOS's. Tests with workers run under each, since a dataset that pickles badly fails only under two.
START_METHODS = ("fork", "forkserver", "spawn")


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    return make_corpus(tmp_path_factory.mktemp("corpus") / "c", 24)


def members_by_key(samples) -> dict[str, dict]:
    """Each sample's members (its ``__`` fields left out) under its key: what two reads of one dataset
    must agree on."""
    return {s["__key__"]: {k: v for k, v in s.items() if not k.startswith("__")} for s in samples}


def expected_from_directory(root: Path) -> dict[str, dict[str, bytes]]:
    """What packing a folder must give, computed straight from the files."""
    out: dict[str, dict[str, bytes]] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            key, ext = rel.split("/")[-1].split(".", 1)
            key = "/".join([*rel.split("/")[:-1], key])
            out.setdefault(key, {})[ext.lower()] = path.read_bytes()
    return out


def expected_from_manifest(manifest: Path) -> dict[str, dict[str, bytes]]:
    """What packing a LLaVA-style manifest gives: media by extension, lists numbered, the record as json."""
    out = {}
    for line in manifest.read_text().splitlines():
        record = json.loads(line)
        members: dict[str, bytes] = {}
        for value in record.values():
            if isinstance(value, str) and "." in value and (manifest.parent / value).is_file():
                members[value.rsplit(".", 1)[1]] = (manifest.parent / value).read_bytes()
            elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                for i, item in enumerate(value):
                    members[f"{i}.{item.rsplit('.', 1)[1]}"] = (manifest.parent / item).read_bytes()
        members["json"] = json.dumps(record, ensure_ascii=False).encode()
        out[record["id"]] = members
    return out


def read_with_tarfile(paths: list[Path]) -> dict[str, dict[str, bytes]]:
    out: dict[str, dict[str, bytes]] = {}
    for path in paths:
        with tarfile.open(path) as tar:
            for member in tar:
                name = member.name
                slash = name.rfind("/")
                dot = name.find(".", slash + 1)
                out.setdefault(name[:dot], {})[name[dot + 1 :]] = tar.extractfile(member).read()
    return out


def read_with_webdataset(pattern: str) -> dict[str, dict[str, bytes]]:
    import webdataset as wds

    out = {}
    for sample in wds.WebDataset(pattern, shardshuffle=False, empty_check=False):
        key = sample["__key__"]
        assert key not in out, f"webdataset saw key {key} twice"
        out[key] = {k: v for k, v in sample.items() if not k.startswith("__")}
    return out


def shard_paths(outdir: Path) -> list[Path]:
    return sorted(outdir.glob("*.tar"))


def write_dataset(root: Path, counts: list[int], *, prefix: str = "train", payload: int = 40) -> Path:
    """Shards with exactly ``counts`` samples each (keys ``s{shard}-{i}``), plus offsets and an index."""
    from packer.sample import Sample
    from packer.shardwriter import TarShardWriter, encode_sample
    from shardstream.format import INDEX_NAME, DatasetIndex, shard_name, shard_pattern

    root.mkdir(parents=True, exist_ok=True)
    entries = []
    for number, count in enumerate(counts):
        writer = TarShardWriter(root / shard_name(prefix, number), max_size=None, max_count=None)
        for i in range(count):
            key = f"s{number:03d}-{i:05d}"
            text = f"{key} ".encode() * (1 + (i * 7 + number) % payload)
            sample = Sample(key, key, (("txt", text), ("cls", str(i % 10).encode())))
            chunks = encode_sample(sample)
            writer.add(key, chunks, sum(len(c) for c in chunks))
        entries.append(writer.close())
    DatasetIndex(shard_pattern(prefix, len(counts)), entries).save(root / INDEX_NAME)
    return root / INDEX_NAME


@contextmanager
def held_by_another_thread(lock) -> Iterator[None]:
    """``lock`` held by another thread for the whole block (as a background thread may hold one at the
    instant a process forks), released after it."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    try:
        yield
    finally:
        release.set()
        holder.join()
