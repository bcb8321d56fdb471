"""Manifest source: one record = one sample; its paths, bytes and `{bytes, path}` structs become members.

Detection of paths is by file extension (cheap, no stat per string); a string with a media extension that
names no file rejects its record as a missing file rather than silently dropping the member.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

from ..sample import Reject, SamplePlan
from .recordplan import MEMBER_NAMINGS, RecordPlanner
from .records import read_records
from .slices import Slice

__all__ = ["MEMBER_NAMINGS", "ManifestSource"]


class ManifestSource:
    """Turn a manifest's (or a table's) records into sample plans; cheap, no media file is opened here."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        media_root: str | os.PathLike[str] | None = None,
        key_field: str | None = None,
        media_fields: Sequence[str] | None = None,
        member_naming: str = "ext",
        manifest_format: str | None = None,
        part: Slice | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.part = part
        root = os.fspath(media_root) if media_root else None
        # A table folder's relative paths are relative to it; a manifest file's, to its folder.
        here = self.path if os.path.isdir(self.path) else os.path.dirname(os.path.abspath(self.path))
        self.media_root = root or os.path.abspath(here)
        self.manifest_format = manifest_format
        self.planner = RecordPlanner(
            self.media_root, key_field=key_field, media_fields=media_fields, member_naming=member_naming
        )

    def __iter__(self) -> Iterator[SamplePlan | Reject]:
        for number, record, error in read_records(self.path, self.manifest_format, self.part):
            where = f"{self.path}:record {number}"
            if error is not None:
                yield Reject(where, error, "bad-record")
                continue
            yield self.planner.plan(number, record, where)
