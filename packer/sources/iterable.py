"""Records from Python: any iterable of dicts, or an HF `datasets` Dataset read as Arrow (never decoded).

The same planner as manifests and tables, so the same rows give the same shards by any route. An
iterable is read once, front to back; a resume reads it again from the start and skips what is packed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

from ..sample import Reject, SamplePlan
from .recordplan import RecordPlanner

HF_BATCH_ROWS = 64  # rows per Arrow batch taken from a `datasets` object; bytes columns stay undecoded


def is_hf_dataset(records: object) -> bool:
    """A `datasets.Dataset` or `IterableDataset` (duck-typed: `datasets` stays an optional install)."""
    return hasattr(records, "with_format") and hasattr(records, "features")


def describe_records(records: object) -> str:
    """What the index's options record as the source, and a resume must match: stable across runs."""
    fingerprint = getattr(records, "_fingerprint", None)
    if is_hf_dataset(records):
        return f"datasets:{type(records).__name__}" + (f":{fingerprint}" if fingerprint else "")
    return "python:records"  # a list, a generator or an iterator over the same rows: the same source


def _rows(records: Iterable[Any]) -> Iterator[Any]:
    if not is_hf_dataset(records):
        yield from records
        return
    # Arrow batches give the stored {bytes, path} structs; iterating rows would decode images to PIL.
    for table in records.with_format("arrow").iter(batch_size=HF_BATCH_ROWS):  # type: ignore[attr-defined]
        yield from table.to_pylist()


class RecordsSource:
    """Sample plans and rejects of Python records, numbered from 0 in iteration order."""

    def __init__(
        self,
        records: Iterable[Any],
        *,
        media_root: str | None = None,
        key_field: str | None = None,
        media_fields: tuple[str, ...] | None = None,
        member_naming: str = "ext",
    ) -> None:
        self.records = records
        self.planner = RecordPlanner(
            os.path.abspath(media_root or os.getcwd()),
            key_field=key_field,
            media_fields=media_fields,
            member_naming=member_naming,
        )

    def __iter__(self) -> Iterator[SamplePlan | Reject]:
        for number, record in enumerate(_rows(self.records)):
            yield self.planner.plan(number, record, f"record {number}")
