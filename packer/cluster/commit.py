"""The commit of a pack in parts: global shard numbers, shards moved to their names, one rejects file and
the index last. Every step can be redone, so a commit killed anywhere is finished by running it again."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from shardstream.errors import PackError
from shardstream.format import (
    INDEX_NAME,
    REJECTS_NAME,
    DatasetIndex,
    ShardEntry,
    offsets_name,
    shard_digits,
    shard_name,
    shard_pattern,
)
from shardstream.format.atomic import fsync_dir, temp_path
from shardstream.format.constants import WORK_DIR_NAME

from ..pack import audit_keys
from ..rejects import RejectsReport
from ..summary import DUPLICATE_ACROSS_SHARDS, PackSummary, summary_from_index
from .part import PartResult, part_done
from .plan import Plan, part_dir, parts_dir, remove_parts


def _move(source: Path, target: Path) -> None:
    """Rename, or find it already renamed by an earlier commit that was stopped."""
    if source.exists():
        os.replace(source, target)
    elif not target.exists():
        raise PackError(
            f"{source}: missing, and not yet moved to {target.name} either: the part folder was changed "
            "after the part was done; delete that part's folder and run the part again"
        )


def _sum(counts: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for one in counts:
        for key, value in one.items():
            total[key] = total.get(key, 0) + value
    return total


def _results(out: Path, plan: Plan) -> list[PartResult]:
    results = [part_done(out, n) for n in range(len(plan.slices))]
    missing = [n for n, result in enumerate(results) if result is None]
    if missing:
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        raise PackError(
            f"{out}: {len(missing)} of {len(results)} parts are not done ({shown}); run them "
            f"(`shardstream pack part {out} --part N`) or rerun the pack with --resume"
        )
    return results  # type: ignore[return-value]


def commit(outdir: str | os.PathLike[str], *, resumed_from_shard: int = 0) -> PackSummary:
    """Turn the finished parts in OUTDIR into one dataset: shards, sidecars, rejects, index."""
    started = time.monotonic()
    out = Path(outdir)
    if (out / INDEX_NAME).exists() and not parts_dir(out).exists():
        remove_parts(out)  # a commit stopped while deleting what it no longer needed
        return summary_from_index(out, started)
    plan = Plan.load(out)
    results = _results(out, plan)
    total = sum(len(r.shards) for r in results)
    digits = shard_digits(total)
    shards: list[ShardEntry] = []
    keys: list[tuple[Path, str]] = []
    for result in results:
        folder = part_dir(out, result.number)
        for entry in result.shards:
            name = shard_name(plan.options.prefix, len(shards), digits)
            # The sidecar first: a shard under its final name always has its offsets beside it.
            _move(folder / offsets_name(entry.name), out / offsets_name(name))
            _move(folder / entry.name, out / name)
            shards.append(ShardEntry(name, entry.samples, entry.size, entry.sha256))
            keys.append((folder / WORK_DIR_NAME / f"{entry.name}.keys", name))
    fsync_dir(out)
    duplicates = _write_rejects(out, plan, results, keys)
    samples = sum(r.samples for r in results)
    if samples == 0:
        remove_parts(out)
        skipped = sum(sum(r.rejected.values()) for r in results)
        raise PackError(
            f"{plan.source}: no samples to pack ({skipped} inputs rejected"
            + (f", see {out / REJECTS_NAME}" if skipped else "")
            + "); no shard was written"
        )
    rejected = _sum([r.rejected for r in results])
    index = DatasetIndex(
        pattern=shard_pattern(plan.options.prefix, total, digits),
        shards=shards,
        fields=_sum([r.fields for r in results]),
        options=plan.output_options,
        rejected={**rejected, **({DUPLICATE_ACROSS_SHARDS: duplicates} if duplicates else {})},
    )
    index.save(out / INDEX_NAME)
    remove_parts(out)
    oversized = sum(r.oversized for r in results)
    return summary_from_index(
        out, started, index=index, oversized=oversized, resumed_from_shard=resumed_from_shard
    )


def _write_rejects(
    out: Path, plan: Plan, results: list[PartResult], keys: list[tuple[Path, str]]
) -> int:
    """The parts' rejects in part order, then the dataset-wide duplicate keys; returns the duplicates."""
    final = out / REJECTS_NAME
    tmp = temp_path(final)
    scratch = parts_dir(out) / "audit"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    with RejectsReport(tmp) as report:
        for result in results:
            if result.rejects_bytes:
                report.append_report(part_dir(out, result.number) / REJECTS_NAME, result.rejects_bytes)
        duplicates = audit_keys(keys, scratch, report, strict=plan.options.strict)
        report.flush()
        any_rejects = report.count_total > 0
    if any_rejects:
        os.replace(tmp, final)
    else:
        tmp.unlink()
        final.unlink(missing_ok=True)
    shutil.rmtree(scratch)
    return duplicates
