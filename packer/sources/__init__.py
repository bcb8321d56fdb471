"""Input sources: a directory tree or a manifest, each a lazy stream of sample plans and rejects."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from shardstream.errors import PackError

from ..sample import Reject, SamplePlan
from .directory import walk_directory
from .manifest import ManifestSource
from .records import detect_format, read_records
from .slices import Slice, csv_slices, directory_slices, json_array_slices, jsonl_slices
from .tables import table_slices

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
    if os.path.isdir(path) and not _is_table(path, manifest_format):
        return walk_directory(path, part)
    if os.path.exists(path):
        _check_manifest(path, manifest_format)
        return ManifestSource(
            path,
            media_root=media_root,
            key_field=key_field,
            media_fields=media_fields,
            member_naming=member_naming,
            manifest_format=manifest_format,
            part=part,
        )
    raise PackError(f"{path}: no such directory or manifest file")


def _is_table(folder: str, manifest_format: str | None) -> bool:
    """A folder of Parquet files or a `save_to_disk` Arrow folder, by its files or by --manifest-format."""
    return manifest_format in ("parquet", "arrow") or detect_format(folder) is not None


def _check_manifest(path: str, manifest_format: str | None) -> None:
    if manifest_format is None and detect_format(path) is None:
        raise PackError(
            f"{path}: not a directory and not a manifest this packer knows by its name "
            "(.jsonl, .ndjson, .json, .csv, .parquet); pass --manifest-format to say which"
        )


def cut_source(source: str, rows: int, manifest_format: str | None = None) -> list[Slice]:
    """SOURCE cut into slices of about ``rows`` records (whole Parquet row groups; a folder's items)."""
    if rows < 1:
        raise ValueError(f"partition_rows must be >= 1, not {rows}")
    if os.path.isdir(source) and not _is_table(source, manifest_format):
        slices = directory_slices(source, rows)
    elif os.path.exists(source):
        _check_manifest(source, manifest_format)
        slices = _CUTTERS[manifest_format or detect_format(source) or ""](source, rows)
    else:
        raise PackError(f"{source}: no such directory or manifest file")
    return slices or [Slice(0, 0)]
