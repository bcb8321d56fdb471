"""The commit of a pack in parts: global shard numbers, shards moved to their names, one rejects file, the
key file and the index last. Every step can be redone, so a commit killed anywhere is finished by running
it again."""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

from shardstream.errors import PackError
from shardstream.format import (
    INDEX_NAME,
    REJECTS_NAME,
    DatasetIndex,
    ShardEntry,
    offsets_name,
    sample_columns_name,
    shard_digits,
    shard_name,
    shard_pattern,
)
from shardstream.format.constants import COLUMNS_NAME, KEYS_NAME, WORK_DIR_NAME
from shardstream.format.keyfile import IDX_SUFFIX
from shardstream.format.samplecols import COST
from shardstream.io.publish import temp_path

from ..keyaudit import KeyAudit, renumber, write_key_file
from ..rejects import RejectsReport
from ..summary import DUPLICATE_ACROSS_SHARDS, PackSummary, summary_from_index
from .part import PartResult, part_done
from .plan import PARTS_DIR_NAME, PLAN_REL, Plan, part_rel, remove_parts
from .store import Store, open_store


def _sum(counts: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for one in counts:
        for key, value in one.items():
            total[key] = total.get(key, 0) + value
    return total


def _results(store: Store, plan: Plan) -> list[PartResult]:
    results = [part_done(store, n) for n in range(len(plan.slices))]
    missing = [n for n, result in enumerate(results) if result is None]
    if missing:
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        raise PackError(
            f"{store.shown}: {len(missing)} of {len(results)} parts are not done ({shown}); run them "
            f"(`shardstream pack part {store.shown} --part N`) or rerun the pack with --resume"
        )
    return results  # type: ignore[return-value]


def committed(store: Store) -> bool:
    return store.exists(INDEX_NAME) and not store.exists(PLAN_REL)


def commit(outdir: str | os.PathLike[str] | Store, *, resumed_from_shard: int = 0) -> PackSummary:
    """Turn the finished parts in OUTDIR into one dataset: shards, sidecars, rejects, index."""
    started = time.monotonic()
    store = open_store(outdir)
    if committed(store):
        remove_parts(store)  # what a commit stopped while deleting left behind
        return _summary(store, started, None, 0, resumed_from_shard)
    plan = Plan.load(store)
    results = _results(store, plan)
    total = sum(len(r.shards) for r in results)
    digits = shard_digits(total)
    shards: list[ShardEntry] = []
    keys: list[tuple[str, str]] = []
    for result in results:
        folder = part_rel(result.number)
        for entry in result.shards:
            name = shard_name(plan.options.prefix, len(shards), digits)
            # Sidecars first: a shard under its final name always has its offsets (and costs) beside it.
            if plan.options.cost is not None:
                cols = sample_columns_name(entry.name)
                store.publish(f"{folder}/{cols}", sample_columns_name(name))
            store.publish(f"{folder}/{offsets_name(entry.name)}", offsets_name(name))
            store.publish(f"{folder}/{entry.name}", name)
            shards.append(ShardEntry(name, entry.samples, entry.size, entry.sha256))
            keys.append((f"{folder}/{WORK_DIR_NAME}/{entry.name}.keys", name))
    store.settle()
    duplicates = _write_rejects(store, plan, results, keys)
    samples = sum(r.samples for r in results)
    if samples == 0:
        store.delete(KEYS_NAME)  # of no sample: the refusal leaves no dataset file behind
        store.delete(KEYS_NAME + IDX_SUFFIX)
        remove_parts(store)
        skipped = sum(sum(r.rejected.values()) for r in results)
        raise PackError(
            f"{plan.source}: no samples to pack ({skipped} inputs rejected"
            + (f", see {store.shown}/{REJECTS_NAME}" if skipped else "")
            + "); no shard was written"
        )
    rejected = _sum([r.rejected for r in results])
    index = DatasetIndex(
        pattern=shard_pattern(plan.options.prefix, total, digits),
        shards=shards,
        fields=_sum([r.fields for r in results]),
        options=plan.output_options,
        rejected={**rejected, **({DUPLICATE_ACROSS_SHARDS: duplicates} if duplicates else {})},
        field_bytes=_sum([r.field_bytes for r in results]),
        keys=KEYS_NAME,
        **_cost_columns(plan, results),
    )
    _save_index(store, index)
    remove_parts(store)
    if store.remote:
        shutil.rmtree(store.local("commit"), ignore_errors=True)
        shutil.rmtree(store.local("fetched"), ignore_errors=True)
    oversized = sum(r.oversized for r in results)
    return _summary(store, started, index, oversized, resumed_from_shard)


def _cost_columns(plan: Plan, results: list[PartResult]) -> dict[str, Any]:
    """With --cost: the index's declaration and each shard's sum and tail, the parts' lists end to end
    (no tails when a part lacks them: an older packer's, whose shards' sidecars are read instead)."""
    if plan.options.cost is None:
        return {}
    sums = [s for r in results for s in r.column_sums.get(COST, [])]
    tails = [t for r in results for t in r.column_tails.get(COST, [])]
    whole = len(tails) == len(sums) and all(
        len(r.column_tails.get(COST, [])) == len(r.shards) for r in results
    )
    return {
        "sample_columns": {COST: "u8"},
        "column_sums": {COST: sums},
        "column_tails": {COST: tails} if whole else {},
    }


def _save_index(store: Store, index: DatasetIndex) -> None:
    """Saved where it is read (a local OUTDIR), or saved in scratch and uploaded: the columns first."""
    if not store.remote:
        index.save(store.local(INDEX_NAME))
        return
    folder = store.local("commit")
    folder.mkdir(parents=True, exist_ok=True)
    index.save(folder / INDEX_NAME)
    if (folder / COLUMNS_NAME).exists():
        store.put(folder / COLUMNS_NAME, COLUMNS_NAME)
    store.put(folder / INDEX_NAME, INDEX_NAME)


def _summary(
    store: Store, started: float, index: DatasetIndex | None, oversized: int, resumed: int
) -> PackSummary:
    if not store.remote:
        return summary_from_index(
            store.local(""), started, index=index, oversized=oversized, resumed_from_shard=resumed
        )
    if index is None:
        data = store.read(INDEX_NAME)
        index = DatasetIndex.from_json((data or b"").decode("utf-8"), source=f"{store.shown}/{INDEX_NAME}")
    return summary_from_index(
        store.shown,
        started,
        index=index,
        oversized=oversized,
        resumed_from_shard=resumed,
        has_rejects=store.exists(REJECTS_NAME),
    )


def _write_rejects(store: Store, plan: Plan, results: list[PartResult], keys: list[tuple[str, str]]) -> int:
    """The parts' rejects in part order, then the key file, reporting the dataset-wide duplicate keys on
    the way (as a local pack does, ``keyaudit.py``); returns the duplicates."""
    scratch = store.local("commit" if store.remote else PARTS_DIR_NAME)
    shutil.rmtree(scratch / "audit", ignore_errors=True)
    (scratch / "audit" / "merge").mkdir(parents=True)
    report_path = scratch / "rejects.jsonl" if store.remote else temp_path(store.local(REJECTS_NAME))
    key_file = scratch / KEYS_NAME if store.remote else store.local(KEYS_NAME)
    with RejectsReport(report_path) as report:
        for result in results:
            if result.rejects_bytes:
                part_rejects = store.fetch(f"{part_rel(result.number)}/{REJECTS_NAME}")
                report.append_report(part_rejects, result.rejects_bytes)
        # Each part numbered its shards from 0: its runs get their shards' numbers in the whole dataset.
        runs = [
            renumber(store.fetch(rel), shard, scratch / "audit" / f"{shard:09d}.keys")
            for shard, (rel, _) in enumerate(keys)
        ]
        audit = KeyAudit([name for _, name in keys], report, strict=plan.options.strict)
        duplicates = write_key_file(runs, key_file, scratch / "audit" / "merge", audit)
        report.flush()
        any_rejects = report.count_total > 0
    if store.remote:  # the data before its block index, both before the index that names them
        store.put(key_file, KEYS_NAME)
        store.put(key_file.with_name(KEYS_NAME + IDX_SUFFIX), KEYS_NAME + IDX_SUFFIX)
    if any_rejects:
        store.put(report_path, REJECTS_NAME)
    else:
        report_path.unlink()
        store.delete(REJECTS_NAME)
    shutil.rmtree(scratch / "audit")
    return duplicates
