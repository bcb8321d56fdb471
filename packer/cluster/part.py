"""One part of a pack in parts: today's packer on one slice, into its own folder, resumable, done marker last.

A part may run anywhere and any number of times (a Ray retry, a requeued SLURM task): a finished part is
left alone, a partial one continues from its journal, and a lock keeps two runs off the same part. For
an OUTDIR on an object store the part packs in local scratch and uploads its files, the marker last.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from shardstream.errors import PackError
from shardstream.format import REJECTS_NAME, ShardEntry, offsets_name, sample_columns_name
from shardstream.format.constants import JOURNAL_NAME, WORK_DIR_NAME
from shardstream.io.publish import write_atomic

from ..loop import Packer
from ..progress import ProgressHook
from ..rejects import RejectsReport
from .plan import Plan, part_rel
from .store import Store, open_store

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
    field_bytes: dict[str, int] = field(default_factory=dict)  # absent from an older packer's marker
    column_sums: dict[str, list[int]] = field(default_factory=dict)  # per shard, with --cost
    column_tails: dict[str, list[list[int]]] = field(default_factory=dict)  # absent from an older marker

    def to_json(self) -> str:
        doc = {**self.__dict__, "shards": [s.to_row() for s in self.shards]}
        return json.dumps(doc) + "\n"

    @classmethod
    def from_json(cls, data: bytes, where: str) -> PartResult:
        try:
            doc = json.loads(data)
            doc["shards"] = [ShardEntry(*row) for row in doc["shards"]]
            return cls(**doc)
        except (ValueError, TypeError, KeyError) as exc:
            why = f"{where}: unreadable done marker ({exc}); delete its folder to run the part again"
            raise PackError(why) from exc


def part_done(outdir: str | os.PathLike[str] | Store, number: int) -> PartResult | None:
    store = open_store(outdir)
    marker = f"{part_rel(number)}/{DONE_NAME}"
    data = store.read(marker)
    return None if data is None else PartResult.from_json(data, f"{store.shown}/{marker}")


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
    outdir: str | os.PathLike[str],
    number: int,
    *,
    workers: int = 1,
    hook: ProgressHook | None = None,
    pool: ProcessPoolExecutor | None = None,
) -> PartResult:
    """Pack part ``number`` of the plan in OUTDIR (or return it, when already done); ``pool``: loader
    processes (``shardstream.parallel.process_pool(workers)``) kept across parts."""
    store = open_store(outdir)
    plan = Plan.load(store)
    if not 0 <= number < len(plan.slices):
        raise PackError(f"{store.shown}: the plan has parts 0..{len(plan.slices) - 1}, not {number}")
    done = part_done(store, number)
    if done is not None:
        return done
    folder = store.local(part_rel(number))
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder):
        done = part_done(store, number)  # finished by another run while this one waited to start
        if done is not None:
            return done
        marker = folder / DONE_NAME
        if marker.exists():  # packed here, the upload cut short
            result = PartResult.from_json(marker.read_bytes(), str(marker))
        else:
            result = _pack_part(plan, number, folder, workers, hook or ProgressHook(), pool)
        if store.remote:
            _upload(store, number, folder, result)
    if store.remote:
        shutil.rmtree(folder, ignore_errors=True)
    return result


def _upload(store: Store, number: int, folder: Path, result: PartResult) -> None:
    """Every file the commit needs, then the done marker: a part is done once its marker is there."""
    rel = part_rel(number)
    for entry in result.shards:
        if result.column_sums:
            cols = sample_columns_name(entry.name)
            store.put(folder / cols, f"{rel}/{cols}")
        store.put(folder / offsets_name(entry.name), f"{rel}/{offsets_name(entry.name)}")
        store.put(folder / entry.name, f"{rel}/{entry.name}")
        store.put(folder / WORK_DIR_NAME / f"{entry.name}.keys", f"{rel}/{WORK_DIR_NAME}/{entry.name}.keys")
    if result.rejects_bytes:
        store.put(folder / REJECTS_NAME, f"{rel}/{REJECTS_NAME}")
    store.put(folder / DONE_NAME, f"{rel}/{DONE_NAME}")


def _pack_part(
    plan: Plan, number: int, folder: Path, workers: int, hook: ProgressHook, pool: ProcessPoolExecutor | None
) -> PartResult:
    part = plan.slices[number]
    journal_options: dict[str, Any] = {**plan.output_options, "part": number, "slice": part.to_json()}
    options = replace(plan.options, workers=workers)
    packer = Packer(plan.source, folder, options, hook, part=part, journal_options=journal_options, pool=pool)
    if (folder / JOURNAL_NAME).exists():
        packer.progress = packer.journal.load(journal_options)
        packer.check_published()
    else:
        _start_fresh(folder)
        packer.journal.start(journal_options)
    with RejectsReport(folder / REJECTS_NAME, keep_bytes=packer.progress.rejects_bytes) as rejects:
        packer.run(rejects)
        rejects_bytes = rejects.flush()
    if packer.consumed != part.count:
        raise PackError(
            f"{plan.source}: part {number} should hold {part.count} records or items but read "
            f"{packer.consumed}: the source changed since the plan was made; plan again (--overwrite)"
        )
    progress = packer.progress
    result = PartResult(
        number=number,
        shards=progress.shards,
        samples=progress.samples,
        payload_bytes=progress.payload_bytes,
        rejects_bytes=rejects_bytes,
        oversized=progress.oversized,
        fields=progress.fields,
        rejected=progress.rejected,
        field_bytes=progress.field_bytes,
        column_sums=progress.column_sums,
        column_tails=progress.whole_tails(),
    )
    (folder / WORK_DIR_NAME).mkdir(exist_ok=True)  # the key files' folder, even for a part of rejects only
    write_atomic(folder / DONE_NAME, result.to_json().encode("utf-8"))
    return result
