"""Cutting a source into contiguous slices of its record order, from metadata and one cheap pass.

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


def _by_offsets(cuts: Iterator[tuple[int, int]], rows: int) -> list[Slice]:
    """Slices of ``rows`` records from (record number, byte offset) of every record, in order."""
    slices: list[Slice] = []
    total = 0
    for number, offset in cuts:
        total = number + 1
        if number % rows == 0:
            slices.append(Slice(number, 0, offset))
    return _with_counts(slices, total)


def _with_counts(slices: list[Slice], total: int) -> list[Slice]:
    if not slices:
        return []
    ends = [s.first for s in slices[1:]] + [total]
    return [Slice(s.first, end - s.first, s.start, s.stop) for s, end in zip(slices, ends, strict=True)]


def jsonl_slices(path: str, rows: int) -> list[Slice]:
    from .records import jsonl_lines

    with open(path, "rb") as handle:
        return _by_offsets(((n, offset) for n, (offset, _) in enumerate(jsonl_lines(handle))), rows)


def csv_slices(path: str, rows: int) -> list[Slice]:
    from .records import csv_rows

    def row_starts() -> Iterator[tuple[int, int]]:
        with open(path, "rb") as handle:
            header, lines, reader = csv_rows(handle)
            if not header:
                return
            number, start = 0, lines.position
            for row in reader:
                if row:  # a row starts where the previous one ended; blank lines are no records
                    yield number, start
                    number += 1
                start = lines.position

    return _by_offsets(row_starts(), rows)


def json_array_slices(path: str, rows: int) -> list[Slice]:
    from .records import _json_array

    total = sum(1 for _ in _json_array(path, None))
    return [Slice(first, min(rows, total - first)) for first in range(0, total, rows)]


def directory_slices(root: str, rows: int) -> list[Slice]:
    """Slices start at a sample's key, after ``rows`` or more items (samples and rejects) of the walk."""
    from ..sample import SamplePlan
    from .directory import walk_directory

    starts: list[tuple[int, str | None]] = [(0, None)]
    total = 0
    for number, item in enumerate(walk_directory(root)):
        total = number + 1
        if number - starts[-1][0] >= rows and isinstance(item, SamplePlan):
            starts.append((number, item.key))
    slices = [
        Slice(first, end - first, key, next_key)
        for (first, key), (end, next_key) in zip(starts, [*starts[1:], (total, None)], strict=True)
    ]
    return [s for s in slices if s.count or len(slices) == 1]
