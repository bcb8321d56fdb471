"""Cutting a source into contiguous slices of its record order, from metadata and one cheap pass.

Each reader cuts its own kind of source (``records.py``: JSONL, CSV and JSON arrays; ``tables.py``:
Parquet and Arrow; ``directory.py``: folders) with what is here; this module imports none of them.
A slice is where a part starts (a byte offset, a row group, a directory key, or nothing: the start),
its first global record number, how many items it holds, and where it stops. Cuts never depend on the
number of machines, so every engine packs the same slices into the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Slice:
    first: int  # global number of its first record (manifests) or item (directories)
    count: int  # records (manifests) or items, rejects included (directories)
    start: int | str | None = None  # byte offset, row group or directory key; None: the very start
    stop: int | str | None = None  # row group or directory key the next slice starts at

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Slice:
        return cls(int(doc["first"]), int(doc["count"]), doc.get("start"), doc.get("stop"))


def by_offsets(cuts: Iterator[tuple[int, int]], rows: int) -> list[Slice]:
    """Slices of ``rows`` records from (record number, byte offset) of every record, in order."""
    slices: list[Slice] = []
    total = 0
    for number, offset in cuts:
        total = number + 1
        if number % rows == 0:
            slices.append(Slice(number, 0, offset))
    return with_counts(slices, total)


def with_counts(slices: list[Slice], total: int) -> list[Slice]:
    if not slices:
        return []
    ends = [s.first for s in slices[1:]] + [total]
    return [Slice(s.first, end - s.first, s.start, s.stop) for s, end in zip(slices, ends, strict=True)]
