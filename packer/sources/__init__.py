"""Input sources: a directory tree or a manifest, each a lazy stream of sample plans and rejects."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from shardstream.errors import PackError

from ..sample import Reject, SamplePlan
from .directory import directory_slices, walk_directory
from .manifest import ManifestSource
from .records import csv_slices, detect_format, json_array_slices, jsonl_slices, read_records
from .slices import Slice
from .tables import TABLE_FORMATS, table_slices

__all__ = [
    "ManifestSource",
    "Slice",
    "cut_source",
    "detect_format",
    "open_source",
    "read_records",
    "walk_directory",
]

_CUTTERS: dict[str, Callable[[str, int], list[Slice]]] = {
    "jsonl": jsonl_slices,
    "json": json_array_slices,
    "csv": csv_slices,
    "parquet": lambda path, rows: table_slices(path, "parquet", rows),
    "arrow": lambda path, rows: table_slices(path, "arrow", rows),
}


def open_source(
    source: str | os.PathLike[str],
    *,
    key_field: str | None = None,
    media_root: str | None = None,
    media_fields: tuple[str, ...] | None = None,
    member_naming: str = "ext",
    manifest_format: str | None = None,
    part: Slice | None = None,
) -> Iterable[SamplePlan | Reject]:
    """SOURCE's sample plans and rejects in its one fixed order, or only ``part``'s share of them."""
    path = os.fspath(source)
    if not os.path.exists(path):
        raise PackError(f"{path}: no such directory or manifest file")
    fmt = _records_format(path, manifest_format)
    if fmt is None:
        return walk_directory(path, part)
    return ManifestSource(
        path,
        media_root=media_root,
        key_field=key_field,
        media_fields=media_fields,
        member_naming=member_naming,
        manifest_format=fmt,
        part=part,
    )


def _records_format(path: str, manifest_format: str | None) -> str | None:
    """The format SOURCE's records are read in, decided once (a table folder's is found by walking it):
    --manifest-format, else the file's name, else a folder's tables; None for a folder of raw files."""
    if os.path.isdir(path):
        return manifest_format if manifest_format in TABLE_FORMATS else detect_format(path)
    fmt = manifest_format or detect_format(path)
    if fmt is None:
        raise PackError(
            f"{path}: not a directory and not a manifest this packer knows by its name "
            "(.jsonl, .ndjson, .json, .csv, .parquet); pass --manifest-format to say which"
        )
    return fmt


def cut_source(source: str, rows: int, manifest_format: str | None = None) -> list[Slice]:
    """SOURCE cut into slices of about ``rows`` records (whole Parquet row groups; a folder's items)."""
    if rows < 1:
        raise ValueError(f"partition_rows must be >= 1, not {rows}")
    if not os.path.exists(source):
        raise PackError(f"{source}: no such directory or manifest file")
    fmt = _records_format(source, manifest_format)
    slices = directory_slices(source, rows) if fmt is None else _CUTTERS[fmt](source, rows)
    return slices or [Slice(0, 0)]
