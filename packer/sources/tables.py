"""Tables as shipped: a Parquet file or folder, or a `save_to_disk` Arrow folder, read in row batches.

Batches are sized in bytes (from the Parquet footer, or each Arrow batch's buffers), so a row of 10 MB
images and a row of captions cost the same memory per batch. Row groups (Parquet) and record batches
(Arrow) are the units a cluster part starts and stops at; record numbers run on across the files.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

from shardstream.errors import PackError

from .slices import Slice

BATCH_BYTES = 8 << 20  # rows per batch: as many as fit here (at least one, at most MAX_BATCH_ROWS)
MAX_BATCH_ROWS = 1024
ARROW_STATE = "state.json"
TABLE_FORMATS = ("parquet", "arrow")
_METADATA = re.compile(r"(^\.|\.md$|\.json$|^LICENSE|\.gitattributes$)", re.IGNORECASE)
_HF_SHARD = re.compile(r"^(?P<split>.+?)-\d{5}-of-\d{5}\.parquet$")
_SPLIT_DIRS = frozenset({"train", "test", "validation", "valid", "dev", "eval"})


def _pyarrow():  # type: ignore[no-untyped-def]
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as exc:
        raise PackError("Parquet and Arrow sources need pyarrow: pip install 'shardstream[parquet]'") from exc
    return pyarrow


def table_format(folder: str) -> str | None:
    """ "arrow" for a `save_to_disk` folder, "parquet" for a folder of Parquet files (and metadata files
    such as README.md) and nothing else; None for a folder of raw files. Stops at the first raw file."""
    if os.path.isfile(os.path.join(folder, ARROW_STATE)) and any(
        n.endswith(".arrow") for n in os.listdir(folder)
    ):
        return "arrow"
    found = False
    for _, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if name.endswith(".parquet"):
                found = True
            elif not _METADATA.search(name):
                return None
    return "parquet" if found else None


def table_files(path: str, fmt: str) -> list[str]:
    """The table's files in record order: one file, a folder's Parquet files sorted by relative path, or
    the Arrow files `state.json` lists. A folder holding several splits is refused (they would mix)."""
    if os.path.isfile(path):
        return [path]
    if fmt == "arrow":
        with open(os.path.join(path, ARROW_STATE), encoding="utf-8") as handle:
            state = json.load(handle)
        return [os.path.join(path, entry["filename"]) for entry in state.get("_data_files", [])]
    found = []
    for top, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [os.path.join(top, n) for n in files if n.endswith(".parquet")]
    found.sort(key=lambda p: os.path.relpath(p, path).split(os.sep))
    _refuse_splits(path, found)
    return found


def _refuse_splits(root: str, files: list[str]) -> None:
    splits: set[str] = set()
    for file in files:
        rel = os.path.relpath(file, root).split(os.sep)
        splits |= {part for part in rel[:-1] if part in _SPLIT_DIRS}
        if match := _HF_SHARD.match(rel[-1]):
            splits.add(match["split"])
    if len(splits) > 1:
        names = ", ".join(sorted(splits))
        raise PackError(
            f"{root}: holds several splits ({names}); packing them together would mix them. Pack one split: "
            "point SOURCE at a folder holding only its files (e.g. download with --include 'data/train-*')"
        )


@dataclass(frozen=True)
class Unit:
    """A row group (Parquet) or record batch (Arrow): where parts may start and stop."""

    file: int
    local: int
    rows: int


def table_units(files: list[str], fmt: str) -> list[Unit]:
    """Every unit of the table's files in order, from Parquet footers or Arrow message headers (no data
    read)."""
    pa = _pyarrow()
    units: list[Unit] = []
    for number, file in enumerate(files):
        if fmt == "arrow":
            with pa.memory_map(file) as mapped:  # batches point into the map; their pages are not read
                reader = pa.ipc.open_stream(mapped)
                units += [Unit(number, i, batch.num_rows) for i, batch in enumerate(reader)]
        else:
            meta = pa.parquet.ParquetFile(file).metadata
            units += [Unit(number, g, meta.row_group(g).num_rows) for g in range(meta.num_row_groups)]
    return units


def table_slices(path: str, fmt: str, rows: int) -> list[Slice]:
    """Whole units: each slice takes units until it holds ``rows`` or more; start/stop are unit numbers."""
    units = table_units(table_files(path, fmt), fmt)
    slices: list[Slice] = []
    first = unit_start = held = 0
    for number, unit in enumerate(units):
        held += unit.rows
        if held >= rows or number == len(units) - 1:
            slices.append(Slice(first, held, unit_start, number + 1))
            first, unit_start, held = first + held, number + 1, 0
    return slices


def _rows_per_batch(nbytes: int, rows: int) -> int:
    return max(1, min(MAX_BATCH_ROWS, BATCH_BYTES * max(rows, 1) // max(nbytes, 1)))


def _parquet_batches(file: str, groups: list[int] | None) -> Iterator[object]:
    pa = _pyarrow()
    # Streamed: one page at a time, not a whole row group (pre-buffering read a 480 MB group whole: 745 MB
    # peak vs 263 MB, where the rest is that file's 60 MB pages; the pages a writer made bound any reader).
    parquet = pa.parquet.ParquetFile(file, buffer_size=1 << 20, pre_buffer=False)
    meta = parquet.metadata
    chosen = range(meta.num_row_groups) if groups is None else groups
    for group in chosen:  # batch size from each group's own size: a file may mix small and large rows
        info = meta.row_group(group)
        size = _rows_per_batch(info.total_byte_size, info.num_rows)
        yield from parquet.iter_batches(batch_size=size, row_groups=[group], use_threads=False)


def _arrow_batches(file: str, batches: list[int] | None) -> Iterator[object]:
    pa = _pyarrow()
    wanted = None if batches is None else set(batches)
    last = None if batches is None else max(batches)
    with pa.OSFile(file) as handle:  # read, not mapped: a mapped file's pages would count as our memory
        for number, batch in enumerate(pa.ipc.open_stream(handle)):
            if wanted is not None and number not in wanted:
                if number > last:  # type: ignore[operator]
                    return
                continue
            size = _rows_per_batch(batch.nbytes, batch.num_rows)
            for offset in range(0, batch.num_rows, size):
                yield batch.slice(offset, size)


def read_table(path: str, fmt: str, part: Slice | None) -> Iterator[tuple[int, object, None]]:
    """(record number, row as a dict, None) for every row of the table, or of ``part``'s units."""
    files = table_files(path, fmt)
    chosen: dict[int, list[int] | None] = dict.fromkeys(range(len(files)))
    if part is not None:
        units = table_units(files, fmt)[int(part.start or 0) : None if part.stop is None else int(part.stop)]
        chosen = {}
        for unit in units:
            chosen.setdefault(unit.file, []).append(unit.local)  # type: ignore[union-attr]
    number = 0 if part is None else part.first
    reader = _arrow_batches if fmt == "arrow" else _parquet_batches
    for file, locals_ in chosen.items():
        for batch in reader(files[file], locals_):
            for record in batch.to_pylist():  # type: ignore[attr-defined]
                yield number, record, None
                number += 1
