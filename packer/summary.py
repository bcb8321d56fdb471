"""What a pack reports: the summary printed by --json, also rebuilt from a finished pack's index."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shardstream.format import INDEX_NAME, REJECTS_NAME, DatasetIndex

DUPLICATE_ACROSS_SHARDS = "duplicate-key-across-shards"


@dataclass
class PackSummary:
    pattern: str
    index: str
    shards: int
    samples: int
    bytes: int
    skipped: int
    rejected: dict[str, int]
    duplicate_keys: int
    oversized: int
    rejects: str | None
    seconds: float
    resumed_from_shard: int = 0
    fields: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def summary_from_index(
    out: Path | str,
    started: float,
    *,
    index: DatasetIndex | None = None,
    oversized: int = 0,
    resumed_from_shard: int | None = None,
    has_rejects: bool | None = None,
) -> PackSummary:
    """The summary of the pack in ``out``: just written (``index`` given) or found finished on disk.
    ``out`` may be a URL when ``index`` and ``has_rejects`` are given."""
    index = index if index is not None else DatasetIndex.load(Path(out) / INDEX_NAME)
    rejects = f"{out}/{REJECTS_NAME}" if isinstance(out, str) else str(out / REJECTS_NAME)
    if has_rejects is None:
        has_rejects = Path(rejects).exists()
    return PackSummary(
        pattern=index.pattern,
        index=f"{out}/{INDEX_NAME}" if isinstance(out, str) else str(out / INDEX_NAME),
        shards=len(index.shards),
        samples=index.samples,
        bytes=index.bytes,
        skipped=sum(n for k, n in index.rejected.items() if k != DUPLICATE_ACROSS_SHARDS),
        rejected={k: n for k, n in index.rejected.items() if k != DUPLICATE_ACROSS_SHARDS},
        duplicate_keys=index.rejected.get(DUPLICATE_ACROSS_SHARDS, 0),
        oversized=oversized,
        rejects=rejects if has_rejects else None,
        seconds=round(time.monotonic() - started, 3),
        resumed_from_shard=len(index.shards) if resumed_from_shard is None else resumed_from_shard,
        fields=dict(sorted(index.fields.items())),
    )
