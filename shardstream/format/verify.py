"""Check a packed dataset against its index: size, sha256, sample count and offsets, shard by shard."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..errors import ShardstreamError
from .index import DatasetIndex
from .offsets import decode_offsets, offsets_name
from .tarread import iter_samples


def sample_starts(path: Path) -> list[int]:
    """The offset of each sample's first header, found by reading the tar (consecutive equal keys group)."""
    spans: list[tuple[int, int]] = []
    with open(path, "rb") as handle:
        for _ in iter_samples(handle, url=str(path), spans=spans):
            pass
    return [start for start, _ in spans]


def verify_dataset(index_path: Path) -> list[str]:
    """Return one line per problem found; an empty list means the dataset matches its index."""
    index = DatasetIndex.load(index_path)
    root = index_path.parent
    problems = []
    for entry in index.shards:
        path = root / entry.name
        if not path.exists():
            problems.append(f"{path}: missing")
            continue
        size = path.stat().st_size
        if size != entry.size:
            problems.append(f"{path}: {size} bytes, index says {entry.size}")
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
        if digest.hexdigest() != entry.sha256:
            problems.append(f"{path}: sha256 {digest.hexdigest()} does not match the index")
        try:
            starts = sample_starts(path)
        except ShardstreamError as exc:
            problems.append(str(exc))
            continue
        if len(starts) != entry.samples:
            problems.append(f"{path}: {len(starts)} samples, index says {entry.samples}")
        sidecar = root / offsets_name(entry.name)
        try:
            offsets = decode_offsets(sidecar.read_bytes(), source=str(sidecar), samples=entry.samples)
        except (OSError, ShardstreamError) as exc:
            problems.append(f"{sidecar}: {exc}")
            continue
        if list(offsets[:-1]) != starts:
            problems.append(f"{sidecar}: offsets do not point at each sample's first header")
    return problems
