"""The plan of a pack in parts: SOURCE's slices and the options, fixed once in OUT for every part to read."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from shardstream.errors import PackError
from shardstream.io.urls import is_remote, local_path

from ..media import MediaOptions
from ..options import PackOptions
from ..sources import Slice, cut_source
from .store import Store, open_store

PARTS_DIR_NAME = ".shardstream-parts"
TRASH_NAME = ".shardstream-parts.trash"
PLAN_NAME = "plan.json"
PLAN_FORMAT = "shardstream-plan"
PLAN_VERSION = 1
DEFAULT_PARTITION_ROWS = 100_000
# PackOptions fields that are how to run, not what to make: a part may run them differently.
_RUN_ONLY = ("workers", "resume", "overwrite")


PLAN_REL = f"{PARTS_DIR_NAME}/{PLAN_NAME}"


def part_rel(number: int) -> str:
    """Part ``number``'s folder, relative to OUTDIR."""
    return f"{PARTS_DIR_NAME}/part-{number:06d}"


def parts_dir(outdir: Path) -> Path:
    return outdir / PARTS_DIR_NAME


def part_dir(outdir: Path, number: int) -> Path:
    return outdir / part_rel(number)


def remove_parts(store: Store) -> None:
    """The parts folder goes, the plan first: without it no leftover is read as an unfinished pack."""
    store.remove(PARTS_DIR_NAME, first=PLAN_NAME)  # a local store also clears a TRASH_NAME left behind


@dataclass(frozen=True)
class Plan:
    source: str  # absolute, so parts running in any working folder read the same files
    options: PackOptions
    partition_rows: int
    slices: tuple[Slice, ...]

    @property
    def output_options(self) -> dict[str, Any]:
        """What decides the bytes: a resume must match it, the index records it."""
        return {**self.options.output_options(self.source), "partition_rows": self.partition_rows}

    def to_json(self) -> str:
        options = {k: v for k, v in asdict(self.options).items() if k not in _RUN_ONLY}
        doc = {
            "format": PLAN_FORMAT,
            "version": PLAN_VERSION,
            "source": self.source,
            "partition_rows": self.partition_rows,
            "options": options,
            "slices": [s.to_json() for s in self.slices],
        }
        return json.dumps(doc, indent=1) + "\n"

    @classmethod
    def load(cls, outdir: str | os.PathLike[str] | Store) -> Plan:
        store = open_store(outdir)
        path = f"{store.shown}/{PLAN_REL}"
        data = store.read(PLAN_REL)
        if data is None:
            raise PackError(f"{path}: no plan here; run `shardstream pack plan SOURCE {store.shown}` first")
        try:
            doc = json.loads(data)
        except ValueError as exc:
            raise PackError(f"{path}: unreadable plan ({exc}); plan again with --overwrite") from exc
        known = isinstance(doc, dict) and doc.get("format") == PLAN_FORMAT
        if not known or doc.get("version") != PLAN_VERSION:
            raise PackError(f"{path}: not a version {PLAN_VERSION} {PLAN_FORMAT} file; plan again")
        try:
            raw = dict(doc["options"])
            media = MediaOptions(**raw.pop("media"))
            fields = raw.pop("media_fields")
            options = PackOptions(**raw, media=media, media_fields=tuple(fields) if fields else None)
            return cls(
                source=str(doc["source"]),
                options=options,
                partition_rows=int(doc["partition_rows"]),
                slices=tuple(Slice.from_json(s) for s in doc["slices"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PackError(f"{path}: malformed plan ({exc!r}); plan again with --overwrite") from exc

    def save(self, outdir: str | os.PathLike[str] | Store) -> None:
        store = open_store(outdir)
        store.write(PLAN_REL, self.to_json().encode("utf-8"))


def make_plan(
    source: str | os.PathLike[str], options: PackOptions, partition_rows: int, *, cut: bool = True
) -> Plan:
    """Cut SOURCE into slices of ``partition_rows`` records: metadata and one listing or line pass only
    (``cut=False``: no slices, only the options the plan would record)."""
    if partition_rows < 1:
        raise ValueError(f"partition_rows must be >= 1, not {partition_rows}")
    path = os.path.abspath(os.fspath(source))
    slices = cut_source(path, partition_rows, options.manifest_format) if cut else []
    root = options.media_root
    root = root if root is None or is_remote(root) else os.path.abspath(local_path(root))
    clean = replace(options, workers=1, resume=False, overwrite=False, media_root=root)
    return Plan(path, clean, partition_rows, tuple(slices))
