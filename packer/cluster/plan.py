"""The plan of a pack in parts: SOURCE's slices and the options, fixed once in OUT for every part to read."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from shardstream.errors import PackError
from shardstream.format.atomic import write_atomic

from ..media import MediaOptions
from ..options import PackOptions
from ..sources import Slice, cut_source

PARTS_DIR_NAME = ".shardstream-parts"
TRASH_NAME = ".shardstream-parts.trash"
PLAN_NAME = "plan.json"
PLAN_FORMAT = "shardstream-plan"
PLAN_VERSION = 1
DEFAULT_PARTITION_ROWS = 100_000
# PackOptions fields that are how to run, not what to make: a part may run them differently.
_RUN_ONLY = ("workers", "resume", "overwrite")


def parts_dir(outdir: Path) -> Path:
    return outdir / PARTS_DIR_NAME


def part_dir(outdir: Path, number: int) -> Path:
    return parts_dir(outdir) / f"part-{number:06d}"


def remove_parts(outdir: Path) -> None:
    """Drop the parts folder in one rename (so no half of it looks like an unfinished pack), then delete."""
    if parts_dir(outdir).exists():
        os.replace(parts_dir(outdir), outdir / TRASH_NAME)
    shutil.rmtree(outdir / TRASH_NAME, ignore_errors=True)


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
    def load(cls, outdir: Path) -> Plan:
        path = parts_dir(outdir) / PLAN_NAME
        try:
            doc = json.loads(path.read_bytes())
        except FileNotFoundError as exc:
            raise PackError(
                f"{path}: no plan here; run `shardstream pack plan SOURCE {outdir}` first"
            ) from exc
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

    def save(self, outdir: Path) -> None:
        parts_dir(outdir).mkdir(parents=True, exist_ok=True)
        write_atomic(parts_dir(outdir) / PLAN_NAME, self.to_json().encode("utf-8"))


def make_plan(
    source: str | os.PathLike[str], options: PackOptions, partition_rows: int, *, cut: bool = True
) -> Plan:
    """Cut SOURCE into slices of ``partition_rows`` records: metadata and one listing or line pass only
    (``cut=False``: no slices, only the options the plan would record)."""
    if partition_rows < 1:
        raise ValueError(f"partition_rows must be >= 1, not {partition_rows}")
    path = os.path.abspath(os.fspath(source))
    slices = cut_source(path, partition_rows, options.manifest_format) if cut else []
    root = os.path.abspath(options.media_root) if options.media_root else None
    clean = replace(options, workers=1, resume=False, overwrite=False, media_root=root)
    return Plan(path, clean, partition_rows, tuple(slices))
