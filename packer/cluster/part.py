"""One part of a pack in parts: today's packer on one slice, into its own folder, resumable, done marker last.

A part may run anywhere and any number of times (a Ray retry, a requeued SLURM task): a finished part is
left alone, a partial one continues from its journal, and a lock keeps two runs off the same part.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from shardstream.errors import PackError
from shardstream.format import REJECTS_NAME, ShardEntry
from shardstream.format.atomic import write_atomic
from shardstream.format.constants import JOURNAL_NAME, WORK_DIR_NAME

from ..pack import Packer, ProgressHook
from ..rejects import RejectsReport
from .plan import Plan, part_dir

DONE_NAME = "done.json"
LOCK_NAME = ".lock"


@dataclass
class PartResult:
    """What a finished part holds; read by the commit from its done marker."""

    number: int
    shards: list[ShardEntry]
    samples: int
    payload_bytes: int
    rejects_bytes: int
    oversized: int
    fields: dict[str, int] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> str:
        doc = {**self.__dict__, "shards": [s.to_row() for s in self.shards]}
        return json.dumps(doc) + "\n"

    @classmethod
    def load(cls, path: Path) -> PartResult:
        try:
            doc = json.loads(path.read_bytes())
            doc["shards"] = [ShardEntry(*row) for row in doc["shards"]]
            return cls(**doc)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            why = f"{path}: unreadable done marker ({exc}); delete its folder to run the part again"
            raise PackError(why) from exc


def part_done(outdir: Path, number: int) -> PartResult | None:
    path = part_dir(outdir, number) / DONE_NAME
    return PartResult.load(path) if path.exists() else None


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    # flock, not a pid file: the kernel drops it when its holder dies, even by kill -9.
    with open(folder / LOCK_NAME, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            raise PackError(
                f"{folder}: process {holder} is packing this part right now; wait for it to end (or stop it)"
            ) from exc
        handle.truncate(0)
        handle.write(f"{os.getpid()}\n")  # who holds it, for that message (and for tests that kill it)
        handle.flush()
        yield


def _start_fresh(folder: Path) -> None:
    """A part with no journal has published nothing: whatever a killed first attempt left goes."""
    for path in folder.iterdir():
        if path.name != LOCK_NAME:
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def run_part(
    outdir: str | os.PathLike[str], number: int, *, workers: int = 1, hook: ProgressHook | None = None
) -> PartResult:
    """Pack part ``number`` of the plan in OUTDIR (or return it, when already done)."""
    out = Path(outdir)
    plan = Plan.load(out)
    if not 0 <= number < len(plan.slices):
        raise PackError(f"{out}: the plan has parts 0..{len(plan.slices) - 1}, not {number}")
    done = part_done(out, number)
    if done is not None:
        return done
    folder = part_dir(out, number)
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder):
        done = part_done(out, number)  # finished by another run while this one waited to start
        if done is not None:
            return done
        return _pack_part(plan, out, number, folder, workers, hook or ProgressHook())


def _pack_part(
    plan: Plan, out: Path, number: int, folder: Path, workers: int, hook: ProgressHook
) -> PartResult:
    part = plan.slices[number]
    journal_options: dict[str, Any] = {**plan.output_options, "part": number, "slice": part.to_json()}
    options = replace(plan.options, workers=workers)
    packer = Packer(plan.source, folder, options, hook, part=part, journal_options=journal_options)
    if (folder / JOURNAL_NAME).exists():
        packer.progress = packer.journal.load(journal_options)
        packer.check_published()
    else:
        _start_fresh(folder)
        packer.journal.start(journal_options)
    with RejectsReport(folder / REJECTS_NAME, keep_bytes=packer.progress.rejects_bytes) as rejects:
        packer.run(rejects)
        rejects_bytes = rejects.flush()
    progress = packer.progress
    if packer.consumed != part.count:
        raise PackError(
            f"{plan.source}: part {number} should hold {part.count} records or items but read "
            f"{packer.consumed}: the source changed since the plan was made; plan again (--overwrite)"
        )
    result = PartResult(
        number=number,
        shards=progress.shards,
        samples=progress.samples,
        payload_bytes=progress.payload_bytes,
        rejects_bytes=rejects_bytes,
        oversized=progress.oversized,
        fields=progress.fields,
        rejected=progress.rejected,
    )
    (folder / WORK_DIR_NAME).mkdir(exist_ok=True)  # the key files' folder, even for a part of rejects only
    write_atomic(folder / DONE_NAME, result.to_json().encode("utf-8"))
    return result
