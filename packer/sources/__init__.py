"""Input sources: a directory tree or a manifest, each a lazy stream of sample plans and rejects."""

from __future__ import annotations

import os
from collections.abc import Iterable

from shardstream.errors import PackError

from ..sample import Reject, SamplePlan
from .directory import walk_directory
from .manifest import ManifestSource
from .records import detect_format, read_records

__all__ = ["ManifestSource", "detect_format", "open_source", "read_records", "walk_directory"]


def open_source(
    source: str | os.PathLike[str],
    *,
    key_field: str | None = None,
    media_root: str | None = None,
    media_fields: tuple[str, ...] | None = None,
    member_naming: str = "ext",
    manifest_format: str | None = None,
) -> Iterable[SamplePlan | Reject]:
    path = os.fspath(source)
    if os.path.isdir(path):
        return walk_directory(path)
    if os.path.isfile(path):
        if manifest_format is None and detect_format(path) is None:
            raise PackError(
                f"{path}: not a directory and not a manifest this packer knows by its name "
                "(.jsonl, .ndjson, .json, .csv, .parquet); pass --manifest-format to say which"
            )
        return ManifestSource(
            path,
            media_root=media_root,
            key_field=key_field,
            media_fields=media_fields,
            member_naming=member_naming,
            manifest_format=manifest_format,
        )
    raise PackError(f"{path}: no such directory or manifest file")
