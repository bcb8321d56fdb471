"""Record readers: JSONL, JSON array, CSV, Parquet and Arrow, streamed record by record, never loaded whole.

Each reader can start at a slice's cut (a byte offset, a row group, a record number) and stop after its
count, so a cluster part reads only its share; record numbers stay global either way.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any

from shardstream.errors import PackError

from .slices import Slice, by_offsets

RecordOrError = tuple[int, Any, str | None]  # (record number, record or None, error message or None)

FORMATS = ("jsonl", "json", "csv", "parquet", "arrow")
_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


def detect_format(path: str) -> str | None:
    """The manifest format a path's name says, or a folder's tables hold; None for neither."""
    if os.path.isdir(path):
        from .tables import table_format

        return table_format(path)
    lower = path.lower()
    for suffix, fmt in _SUFFIXES.items():
        if lower.endswith(suffix):
            return fmt
    return None


def jsonl_lines(handle: Any) -> Iterator[tuple[int, bytes]]:
    """(byte offset, line) of every non-blank line from the handle's position: one record each."""
    position = handle.tell()
    for line in handle:
        start, position = position, position + len(line)
        if line.strip():
            yield start, line


def _jsonl(path: str, part: Slice | None) -> Iterator[RecordOrError]:
    with open(path, "rb") as handle:
        number = 0
        if part is not None:
            handle.seek(int(part.start or 0))
            number = part.first
        lines = jsonl_lines(handle)
        for _, line in lines if part is None else islice(lines, part.count):
            try:
                yield number, json.loads(line.decode("utf-8", "surrogateescape")), None
            except json.JSONDecodeError as exc:
                yield number, None, f"line is not valid JSON ({exc.msg} at column {exc.colno})"
            number += 1


def _json_array(path: str, part: Slice | None) -> Iterator[RecordOrError]:
    import ijson

    # A JSON array cannot be entered mid-way: a part parses (and drops) the records before its own.
    first = part.first if part is not None else 0
    stop = first + part.count if part is not None else None
    with open(path, "rb") as handle:
        try:
            items = enumerate(ijson.items(handle, "item", use_float=True))
            for number, record in islice(items, first, stop):
                yield number, record, None
        except ijson.JSONError as exc:
            raise PackError(f"{path}: not a JSON array of records ({exc}); JSONL files need .jsonl") from exc


class CsvLines:
    """Text lines of a CSV read as bytes, so the byte offset where each row ends is known (for cuts)."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.position = handle.tell()

    def __iter__(self) -> Iterator[str]:
        for line in self.handle:
            self.position += len(line)
            yield line.decode("utf-8")


def csv_rows(handle: Any) -> tuple[list[str], CsvLines, Any]:
    """The header and a row reader over ``handle``; the caller may seek before reading rows."""
    lines = CsvLines(handle)
    reader = csv.reader(lines)
    return next(reader, []), lines, reader  # no header: an empty file, no records


def _csv(path: str, part: Slice | None) -> Iterator[RecordOrError]:
    with open(path, "rb") as handle:
        header, lines, reader = csv_rows(handle)
        if not header:
            return
        number = 0
        if part is not None:
            handle.seek(int(part.start or 0))
            lines.position, number = handle.tell(), part.first
        rows = (row for row in reader if row)  # blank lines are no records, as csv.DictReader skips them
        for row in rows if part is None else islice(rows, part.count):
            if len(row) > len(header):
                yield number, None, f"row has {len(row)} cells, header has {len(header)}"
            else:
                # Short rows fill with None, as csv.DictReader does.
                yield number, dict(zip(header, row + [None] * (len(header) - len(row)), strict=True)), None
            number += 1


def _table(fmt: str) -> Callable[[str, Slice | None], Iterator[RecordOrError]]:
    def read(path: str, part: Slice | None) -> Iterator[RecordOrError]:
        from .tables import read_table

        return read_table(path, fmt, part)

    return read


READERS: dict[str, Callable[[str, Slice | None], Iterator[RecordOrError]]] = {
    "jsonl": _jsonl,
    "json": _json_array,
    "csv": _csv,
    "parquet": _table("parquet"),
    "arrow": _table("arrow"),
}


def read_records(
    path: str | os.PathLike[str], fmt: str | None = None, part: Slice | None = None
) -> Iterator[RecordOrError]:
    """The manifest's records in order, or only ``part``'s share of them."""
    path = os.fspath(path)
    fmt = fmt or detect_format(path)
    if fmt is None:
        raise ValueError(
            f"manifest_format: cannot tell the format of {path!r} from its name; pass one of {FORMATS}"
        )
    if fmt not in READERS:
        raise ValueError(f"manifest_format must be one of {FORMATS}, not {fmt!r}")
    return READERS[fmt](path, part)


# -- slices for packing in parts: cut where a record starts ---------------------------------------
def jsonl_slices(path: str, rows: int) -> list[Slice]:
    with open(path, "rb") as handle:
        return by_offsets(((n, offset) for n, (offset, _) in enumerate(jsonl_lines(handle))), rows)


def csv_slices(path: str, rows: int) -> list[Slice]:
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

    return by_offsets(row_starts(), rows)


def json_array_slices(path: str, rows: int) -> list[Slice]:
    total = sum(1 for _ in _json_array(path, None))
    return [Slice(first, min(rows, total - first)) for first in range(0, total, rows)]
