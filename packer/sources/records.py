"""Manifest readers: JSONL, JSON array, CSV and Parquet, streamed record by record, never loaded whole."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from shardstream.errors import PackError

RecordOrError = tuple[int, Any, str | None]  # (record number, record or None, error message or None)

FORMATS = ("jsonl", "json", "csv", "parquet")
_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


def detect_format(path: str) -> str | None:
    lower = path.lower()
    for suffix, fmt in _SUFFIXES.items():
        if lower.endswith(suffix):
            return fmt
    return None


def _jsonl(path: str) -> Iterator[RecordOrError]:
    with open(path, encoding="utf-8", errors="surrogateescape") as handle:
        number = 0
        for line in handle:
            if not line.strip():
                continue
            try:
                yield number, json.loads(line), None
            except json.JSONDecodeError as exc:
                yield number, None, f"line is not valid JSON ({exc.msg} at column {exc.colno})"
            number += 1


def _json_array(path: str) -> Iterator[RecordOrError]:
    import ijson

    with open(path, "rb") as handle:
        try:
            for number, record in enumerate(ijson.items(handle, "item", use_float=True)):
                yield number, record, None
        except ijson.JSONError as exc:
            raise PackError(f"{path}: not a JSON array of records ({exc}); JSONL files need .jsonl") from exc


def _csv(path: str) -> Iterator[RecordOrError]:
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        for number, row in enumerate(reader):
            if None in row:
                yield (
                    number,
                    None,
                    f"row has {len(row) - 1 + len(row[None])} cells, header has {len(row) - 1}",
                )
                continue
            yield number, row, None


def _parquet(path: str) -> Iterator[RecordOrError]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise PackError("Parquet manifests need pyarrow: pip install 'shardstream[parquet]'") from exc
    number = 0
    parquet = pq.ParquetFile(path)
    for batch in parquet.iter_batches(batch_size=1024):
        for record in batch.to_pylist():
            yield number, record, None
            number += 1


READERS: dict[str, Callable[[str], Iterator[RecordOrError]]] = {
    "jsonl": _jsonl,
    "json": _json_array,
    "csv": _csv,
    "parquet": _parquet,
}


def read_records(path: str | os.PathLike[str], fmt: str | None = None) -> Iterator[RecordOrError]:
    path = os.fspath(path)
    fmt = fmt or detect_format(path)
    if fmt is None:
        raise ValueError(
            f"manifest_format: cannot tell the format of {path!r} from its name; pass one of {FORMATS}"
        )
    if fmt not in READERS:
        raise ValueError(f"manifest_format must be one of {FORMATS}, not {fmt!r}")
    return READERS[fmt](path)
