"""Columns over a whole dataset: every shard's .cols (in parallel), each journaled once published, then
the index last; a killed run, rerun, computes only the shards no journal line covers (and redoing one
whose line was lost writes the same bytes: a column replaced in place is the same file)."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..format.constants import INDEX_NAME
from ..format.index import DatasetIndex
from ..format.samplecols import sample_columns_name
from ..format.sidecars import sample_columns_sidecar
from ..io.journal import JsonLines, changed_options, records
from ..io.publish import write_atomic
from ..io.urls import is_remote, local_path
from ..parallel import ordered_map
from .shard import ShardTask, column_batch, load_function

WORK_NAME = ".shardstream-columns-work"  # beside the index: the journal and the run's options
ENGINES = ("local", "ray")


@dataclass
class ColumnOptions:
    """``fn``: ``module:function``, called with each sample as a dict of raw bytes by member name plus
    ``__key__`` and ``__url__`` (what ``decode=False`` streams), returning an int (the column ``name``)
    or a dict of column name -> int (several columns). ``workers``: processes (local) or tasks at once
    (ray). ``engine``: ``local`` or ``ray`` (``address``: a cluster's; None: a head of its own, from
    ``start_head``, a callable taking the CPU count and returning an object with ``address`` and
    ``stop()``). ``restart``: forget an interrupted run's journal. ``progress``: called with each
    journal record; ``planned``: once with the shards and samples still to do."""

    fn: str
    name: str = "cost"
    workers: int = 1
    engine: str = "local"
    address: str | None = None
    start_head: Callable[[int], Any] | None = None
    restart: bool = False
    progress: Callable[[dict[str, Any]], None] | None = None
    planned: Callable[[int, int], None] | None = None


@dataclass
class ColumnSummary:
    index: str
    shards: int = 0
    samples: int = 0
    computed: int = 0  # shards computed by this run (the rest came from the journal)
    columns: dict[str, str] = field(default_factory=dict)  # written by this run: name -> dtype
    sums: dict[str, int] = field(default_factory=dict)  # each written column's total
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def compute_columns(dataset: str | Path, options: ColumnOptions) -> ColumnSummary:
    """Write ``options.fn``'s column(s) into every shard's .cols and the index (see ColumnOptions)."""
    started = time.perf_counter()
    _check(options)
    index_path = _index_path(Path(dataset))
    index = DatasetIndex.load(index_path)
    tasks = _tasks(index_path, index, options)
    work = index_path.parent / WORK_NAME
    if options.restart and work.exists():
        shutil.rmtree(work)
    work.mkdir(exist_ok=True)
    digest = hashlib.sha256(index_path.read_bytes()).hexdigest()
    done = _journaled(work / "journal.jsonl")
    _check_run(work, {"fn": options.fn, "name": options.name, "index_sha256": digest}, bool(done))
    todo = [task for task in tasks if task.shard not in done]
    if options.planned is not None:
        options.planned(len(todo), sum(task.samples for task in todo))
    journal = JsonLines(work / "journal.jsonl", durable=False)
    try:
        for record in _run(todo, options):
            done[record["shard"]] = record
            journal.append(record)
            if options.progress is not None:
                options.progress(record)
    finally:
        journal.close()
    summary = ColumnSummary(index=str(index_path), shards=len(tasks), computed=len(todo))
    summary.samples = sum(task.samples for task in tasks)
    _commit(index_path, index, [done[task.shard] for task in tasks], summary)
    shutil.rmtree(work, ignore_errors=True)
    summary.seconds = round(time.perf_counter() - started, 3)
    return summary


def _check(options: ColumnOptions) -> None:
    if options.workers < 1:
        raise ValueError(f"workers must be >= 1, not {options.workers}")
    if options.engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {options.engine!r}")
    load_function(options.fn)  # refused here, once, rather than in every worker


def _index_path(dataset: Path) -> Path:
    path = dataset / INDEX_NAME if dataset.is_dir() else dataset
    if not path.exists():
        raise ValueError(
            f"dataset {dataset}: no {INDEX_NAME}; pack it (shardstream pack) or index it (shardstream index)"
        )
    return path


def _tasks(index_path: Path, index: DatasetIndex, options: ColumnOptions) -> list[ShardTask]:
    """One task a shard, with where its .cols goes: beside the shard, or beside its offsets sidecar in
    the index's sidecars folder (the rule ``format/verify.py`` follows for the offsets)."""
    root, tasks = index_path.parent, []
    for i, entry in enumerate(index.shards):
        if is_remote(entry.name):
            raise ValueError(f"shard {entry.name}: columns are computed for local shards only")
        path = root / local_path(entry.name)
        if index.sidecars is not None:
            cols = root / index.sidecars / sample_columns_sidecar(entry.name)
        else:
            cols = path.with_name(sample_columns_name(path.name))
        tasks.append(ShardTask(i, str(path), str(cols), entry.samples, options.fn, options.name))
    return tasks


def _check_run(work: Path, recorded: dict[str, Any], started: bool) -> None:
    """A resumed run must compute what the interrupted one did, over the same index (a run that
    journaled nothing, e.g. one whose function failed on the first shard, is simply replaced)."""
    path = work / "options.json"
    if path.exists() and started:
        before = json.loads(path.read_text(encoding="utf-8"))
        if before != recorded:
            raise FormatError(
                f"{work} holds an unfinished columns run with other options "
                f"({', '.join(changed_options(before, recorded))}); run it again with the same ones to "
                "finish it, or pass --restart to start over"
            )
        return
    write_atomic(path, json.dumps(recorded, sort_keys=True).encode("utf-8"))


def _journaled(path: Path) -> dict[int, dict[str, Any]]:
    if not path.exists():
        return {}
    return {int(r["shard"]): r for _, r in records(path) if r is not None}


def _run(todo: list[ShardTask], options: ColumnOptions) -> Iterator[dict[str, Any]]:
    if options.engine == "ray":
        from .onray import map_on_ray  # Ray loads only when asked for

        return map_on_ray(todo, options.workers, address=options.address, start_head=options.start_head)
    workers = min(options.workers, max(1, len(todo)))
    return ordered_map(column_batch, todo, workers=workers, chunk=1)


def _commit(
    index_path: Path, index: DatasetIndex, done: list[dict[str, Any]], summary: ColumnSummary
) -> None:
    """The index declares the columns written and their per-shard sums; every shard must agree on them."""
    names = done[0]["dtypes"] if done else {}
    for record in done:
        if record["dtypes"] != names:
            raise FormatError(
                f"shard {record['shard']} got columns {record['dtypes']}, shard 0 {names}: the function "
                "must give the same columns for every sample of every shard"
            )
    for name, dtype in names.items():
        index.sample_columns[name] = dtype
        index.column_sums[name] = [int(record["sums"][name]) for record in done]
        summary.sums[name] = sum(index.column_sums[name])
        # every shard's tail, or none (a journal an older run wrote, a column with negative values)
        tails = [record.get("tails", {}).get(name) for record in done]
        if all(tail is not None for tail in tails):
            index.column_tails[name] = tails
        else:
            index.column_tails.pop(name, None)
    summary.columns = dict(names)
    index.save(index_path)
