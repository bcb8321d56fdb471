"""``shardstream index``: scan existing tars (in parallel, journaled, in parts), then write the index.

Scan -> journal -> commit. Each shard's scan publishes its offsets sidecar and sorted key run, then a
journal line; a killed run, rerun, scans only what no line covers. ``part=(i, n)`` scans one contiguous
n-th of the shards and stops there; a run without ``part`` over the same folder takes every part's lines,
scans what is left and commits: the key runs merged into the key file, the rejects, the index written
last. Damaged, missing, empty and compressed shards are left out and reported, never fatal.

``cost``: each sample's .json record is read too (only that member) for a cost field, the rule
``pack --cost`` follows (``format/costfield.py``), and each shard's costs go to its .cols. A sample without
a valid cost is a ``bad-cost`` problem, and its shard gets no .cols; the index then declares no cost
column at all (a column every shard has, or none): a cost of 0 would be a lie a budget planner trusts.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import redact_url
from ..format.constants import INDEX_NAME, INDEX_WORK_NAME, KEYS_NAME, REJECTS_NAME, SIDECARS_DIR
from ..format.costfield import BAD_COST
from ..format.index import DatasetIndex, ShardEntry
from ..format.keyfile import KeyFileWriter
from ..format.patterns import infer_pattern
from ..format.samplecols import COST
from ..io.publish import write_atomic
from ..io.urls import is_remote
from ..parallel import ordered_map
from .journal import check_options, index_journal, journal_path, load_records
from .keymerge import merge_runs
from .sources import ShardSource, resolve_source
from .worker import RemoteOpener, ScanSettings, run_path, scan_batch

Progress = Callable[[dict[str, Any]], None]


@dataclass
class IndexOptions:
    out: Path | None = None
    workers: int = 1
    checksum: bool = False
    partial: bool = False
    part: tuple[int, int] | None = None  # (i, n), 1-based
    restart: bool = False
    open_remote: RemoteOpener | None = None
    progress: Progress | None = None  # called with each journal record as it lands
    planned: Callable[[int], None] | None = None  # called once with the number of shards to scan
    cost: str | None = None  # a field of each sample's .json record: a cost column (module docstring)


@dataclass
class IndexSummary:
    index: str | None
    out: str
    shards: int = 0
    samples: int = 0
    bytes: int = 0
    pattern: str | None = None
    scanned: int = 0  # shards scanned by this run (the rest came from the journal)
    skipped: dict[str, int] = field(default_factory=dict)
    problems: list[dict[str, Any]] = field(default_factory=list)
    duplicate_keys: int = 0
    unkeyed: int = 0
    part: str | None = None
    remaining: int = 0  # shards no part has scanned yet (with part=...)
    cost_total: int | None = None  # with cost=...: the index's cost column summed (None: no column)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def index_source(text: str, options: IndexOptions) -> IndexSummary:
    started = time.perf_counter()
    if options.workers < 1:
        raise ValueError(f"workers must be >= 1, not {options.workers}")
    source = resolve_source(text)
    out = options.out if options.out is not None else source.home
    if out is None:
        raise ValueError(f"source {redact_url(text)!r} is remote: give --out DIR for the index and sidecars")
    out = Path(out).resolve()
    if options.out is None and not os.access(out, os.W_OK):
        raise ValueError(f"{out} is not writable: write the index and sidecars elsewhere with --out DIR")
    out.mkdir(parents=True, exist_ok=True)
    _refuse_foreign_index(out / INDEX_NAME)
    beside = source.home is not None and out == source.home
    names = [_name(url, out) for url in source.urls]
    work = out / INDEX_WORK_NAME
    if options.restart and work.exists():
        shutil.rmtree(work)
    (work / "keys").mkdir(parents=True, exist_ok=True)
    sidecars = None if beside else str(out / SIDECARS_DIR)
    if sidecars is not None:
        os.makedirs(sidecars, exist_ok=True)
    recorded = {
        "source": source.text,
        "shards": len(source.urls),
        "checksum": options.checksum,
        "partial": options.partial,
        "sidecars": sidecars is not None,
    }
    if options.cost is not None:  # absent otherwise: an interrupted run of an earlier version resumes
        recorded["cost"] = options.cost
    check_options(work, recorded)
    keys = str(work / "keys")
    settings = ScanSettings(
        options.checksum, options.partial, keys, sidecars, options.open_remote, options.cost
    )
    records = _still_valid(load_records(work))
    first, stop = _part_range(options.part, len(source.urls))
    todo = [(i, source.urls[i], names[i]) for i in range(first, stop) if i not in records]
    journal = index_journal(journal_path(work, options.part))
    if options.planned is not None:
        options.planned(len(todo))
    try:
        for record in _scan_all(todo, settings, options.workers):
            records[record["shard"]] = record
            journal.append(record)
            if options.progress is not None:
                options.progress(record)
    finally:
        journal.close()
    summary = IndexSummary(index=None, out=str(out), scanned=len(todo))
    if options.part is not None:
        summary.part = f"{options.part[0]}/{options.part[1]}"
        summary.remaining = sum(1 for i in range(len(source.urls)) if i not in records)
        _count(summary, records, first, stop, options.partial)
    else:
        _commit(source, names, records, out, work, sidecars, options, summary)
    summary.seconds = round(time.perf_counter() - started, 3)
    return summary


def _refuse_foreign_index(path: Path) -> None:
    """An index ``shardstream pack`` wrote (with its rejects) is never replaced by a scan's."""
    if not path.exists():
        return
    try:  # the JSON alone: a version-2 index whose columns file is gone is still recognized
        doc = json.loads(path.read_bytes())
        options = doc.get("options") if isinstance(doc, dict) else None
    except (OSError, ValueError):
        options = None
    if not isinstance(options, dict):
        options = {}
    if "indexed_from" not in options:
        raise ValueError(
            f"{path} was not written by shardstream index (a packed dataset already has its index); "
            "to index these shards anyway, write elsewhere with --out DIR"
        )


def _name(url: str, out: Path) -> str:
    """How the index names a shard: relative to the index's folder (``../wds/a.tar`` for ``--out`` beside
    the shards), so that the two folders move together; in full only where no relative path leads there
    (another drive). A URL loses its user:password: credentials belong in HttpOptions or
    $SHARDSTREAM_HTTP_HEADERS, not a file."""
    if is_remote(url):
        return redact_url(url)
    # ``out`` is resolved, so the shard's folder is too (the shard itself may be a link: kept as named).
    folder, name = os.path.split(os.path.abspath(url))
    try:
        relative = os.path.relpath(os.path.join(os.path.realpath(folder), name), out)
    except ValueError:  # Windows: another drive
        return url
    return Path(relative).as_posix()


def _part_range(part: tuple[int, int] | None, total: int) -> tuple[int, int]:
    if part is None:
        return 0, total
    i, n = part
    if not (1 <= i <= n):
        raise ValueError(f"part must be i/N with 1 <= i <= N, not {i}/{n}")
    return (i - 1) * total // n, i * total // n


def _still_valid(records: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Journal lines whose local shard still has the size and mtime it had when scanned."""
    valid = {}
    for shard, record in records.items():
        stat = record.get("stat")
        if stat is not None:
            try:
                info = os.stat(record["url"])
            except OSError:
                continue
            if [info.st_size, info.st_mtime_ns] != stat:
                continue
        valid[shard] = record
    return valid


def _scan_all(
    todo: list[tuple[int, str, str]], settings: ScanSettings, workers: int
) -> Iterator[dict[str, Any]]:
    workers = min(workers, max(1, len(todo)))
    batch = max(1, min(16, len(todo) // (workers * 8)))
    return ordered_map(scan_batch, todo, workers=workers, chunk=batch, args=(settings,))


def _kind(record: dict[str, Any], partial: bool) -> str | None:
    """Why a shard is left out (or cut short), or None when it is indexed whole."""
    if record["missing"]:
        return "missing-shard"
    if record["damage"] is not None:
        return "partial-shard" if partial and record["samples"] else "damaged-shard"
    return "empty-shard" if not record["samples"] else None


def _kept(record: dict[str, Any], partial: bool) -> bool:
    return record["samples"] > 0 and (record["damage"] is None or partial)


def _count(
    summary: IndexSummary, records: dict[int, dict[str, Any]], first: int, stop: int, partial: bool
) -> None:
    for i in range(first, stop):
        record = records.get(i)
        if record is None:
            continue
        kind = _kind(record, partial)
        if kind is not None:
            summary.skipped[kind] = summary.skipped.get(kind, 0) + 1
            shard, reason = redact_url(record["url"]), record["damage"] or "no samples"
            problem = {"shard": shard, "kind": kind, "offset": record["offset"], "reason": reason}
            summary.problems.append(problem)
        if _kept(record, partial):
            _count_bad_costs(summary, record)
            summary.shards += 1
            summary.samples += record["samples"]
            summary.bytes += record["bytes"]
            summary.unkeyed += record["unkeyed"]


def _count_bad_costs(summary: IndexSummary, record: dict[str, Any]) -> None:
    """A kept shard's samples without a valid cost: all counted, the journaled few each a problem."""
    if not record.get("bad_costs"):
        return
    summary.skipped[BAD_COST] = summary.skipped.get(BAD_COST, 0) + record["bad_costs"]
    more = record["bad_costs"] - len(record["bad_cost_samples"])
    for bad in record["bad_cost_samples"]:
        reason = f"sample {bad['key']!r}: {bad['reason']}" + (f" ({more} more in this shard)" if more else "")
        problem = {"shard": redact_url(record["url"]), "kind": BAD_COST, "offset": bad["offset"]}
        summary.problems.append({**problem, "reason": reason})


def _commit(
    source: ShardSource,
    names: list[str],
    records: dict[int, dict[str, Any]],
    out: Path,
    work: Path,
    sidecars: str | None,
    options: IndexOptions,
    summary: IndexSummary,
) -> None:
    _count(summary, records, 0, len(source.urls), options.partial)
    for url, reason in source.skipped:
        summary.skipped["compressed-shard"] = summary.skipped.get("compressed-shard", 0) + 1
        problem = {"shard": redact_url(url), "kind": "compressed-shard", "offset": None, "reason": reason}
        summary.problems.append(problem)
    kept = [i for i in range(len(source.urls)) if _kept(records[i], options.partial)]
    if not kept:
        raise ValueError(f"source {source.text!r}: no shard holds a readable sample; see the problems above")
    entries, fields, field_bytes = [], {}, {}
    for i in kept:
        record = records[i]
        entries.append(ShardEntry(names[i], record["samples"], record["bytes"], record["sha256"]))
        for ext, (count, size) in record["fields"].items():
            fields[ext] = fields.get(ext, 0) + count
            field_bytes[ext] = field_bytes.get(ext, 0) + size
    remap = None
    if kept != list(range(len(kept))):
        remap = [0] * len(source.urls)
        for j, i in enumerate(kept):
            remap[i] = j
    with KeyFileWriter(out / KEYS_NAME) as writer:
        merge_runs([run_path(str(work / "keys"), i) for i in kept], writer, work, remap)
    summary.duplicate_keys = writer.repeated
    _write_rejects(out / REJECTS_NAME, summary.problems)
    pattern = infer_pattern([names[i] for i in kept])
    made_with = {
        "indexed_from": redact_url(source.text),
        "checksum": options.checksum,
        "partial": options.partial,
    }
    columns = _cost_columns([records[i] for i in kept], options.cost)
    index = DatasetIndex(
        pattern=pattern,
        shards=entries,
        fields=fields,
        field_bytes=field_bytes,
        options=made_with,
        rejected=dict(summary.skipped),
        sidecars=None if sidecars is None else SIDECARS_DIR,
        keys=KEYS_NAME,
        **columns,
    )
    if columns:
        summary.cost_total = sum(columns["column_sums"][COST])
    index.save(out / INDEX_NAME)
    shutil.rmtree(work, ignore_errors=True)
    summary.index, summary.pattern = str(out / INDEX_NAME), pattern


def _cost_columns(kept: list[dict[str, Any]], cost: str | None) -> dict[str, Any]:
    """The index's cost column when every kept shard has its .cols (none: a bad cost, or no ``cost``),
    with each shard's tail when every record has one (a journal an older indexer wrote has none)."""
    if cost is None or any("cost_sum" not in record for record in kept):
        return {}
    tails = [record["cost_tail"] for record in kept if "cost_tail" in record]
    return {
        "sample_columns": {COST: "u8"},
        "column_sums": {COST: [record["cost_sum"] for record in kept]},
        "column_tails": {COST: tails} if len(tails) == len(kept) else {},
    }


def _write_rejects(path: Path, problems: list[dict[str, Any]]) -> None:
    if not problems:
        path.unlink(missing_ok=True)
        return
    keys = (("source", "shard"), ("reason", "reason"), ("kind", "kind"), ("offset", "offset"))
    lines = [json.dumps({name: problem[key] for name, key in keys}) for problem in problems]
    write_atomic(path, ("\n".join(lines) + "\n").encode("utf-8"))
