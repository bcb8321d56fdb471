"""The pack job: source -> the packing loop -> key file and index; resumable at shard boundaries."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from shardstream.errors import PackError
from shardstream.format import (
    INDEX_NAME,
    REJECTS_NAME,
    DatasetIndex,
    shard_digits,
    shard_pattern,
)
from shardstream.format.constants import KEYS_NAME
from shardstream.format.samplecols import COST

from .loop import Packer, no_space
from .options import PackOptions
from .progress import PackBar, ProgressHook, count_in_background
from .rejects import RejectsReport
from .sources.iterable import describe_records
from .summary import DUPLICATE_ACROSS_SHARDS, PackSummary, summary_from_index

# The count of SOURCE runs beside the pack and ends first as a rule (a listing against a pack); a slow
# filesystem gets this long after the pack before the bar closes without a total.
COUNT_WAIT_S = 2.0


def pack(
    source: str | os.PathLike[str] | Iterable[Any],
    outdir: str | os.PathLike[str],
    options: PackOptions | None = None,
    *,
    hook: ProgressHook | None = None,
    progress: bool | None = None,
) -> PackSummary:
    """Pack SOURCE into size-capped tar shards plus an index in OUTDIR.

    SOURCE is a directory of raw files, a manifest, a Parquet or Arrow table (file or folder), or any
    iterable of dicts whose values are bytes, paths or JSON values (a generator, an HF ``datasets``
    Dataset or IterableDataset). With ``resume``, an iterable is read again from its start.

    ``hook``: a ``ProgressHook`` told of every sample, shard and reject. ``progress``: draw a progress bar
    on stderr (samples done of SOURCE's total, counted in the background, with an ETA); None: when stderr
    is a terminal and no ``hook`` is given (in a notebook, pass True)."""
    options = options or PackOptions()
    bar = None
    if hook is None and (progress or (progress is None and sys.stderr.isatty())):
        hook = bar = PackBar(quiet=False)
    try:
        return _pack(source, Path(outdir), options, hook or ProgressHook())
    finally:
        if bar is not None:
            bar.close()


def _pack(
    source: str | os.PathLike[str] | Iterable[Any], out: Path, options: PackOptions, hook: ProgressHook
) -> PackSummary:
    started = time.monotonic()
    if isinstance(source, (str, os.PathLike)):
        source = os.fspath(source)
        if not os.path.exists(source):
            raise PackError(f"{source}: no such directory or manifest file")
        packer = Packer(source, out, options, hook)
    elif isinstance(source, (bytes, dict)) or not isinstance(source, Iterable):
        raise ValueError(f"source must be a path or an iterable of dicts, not {type(source).__name__}")
    else:
        packer = Packer(describe_records(source), out, options, hook, records=source)
    if packer.prepare():
        return summary_from_index(out, started)
    counting = count_in_background(hook, source, options.manifest_format)
    try:
        summary = _run_and_index(packer, started)
        if counting is not None:
            counting.join(timeout=COUNT_WAIT_S)  # the last bar shows the total, unless counting is stuck
        return summary
    except OSError as exc:  # a failure in the loop is already a PackError naming its shard
        full = no_space(exc, out, "the end of the pack (the key file, the rejects, the index)")
        if full is None:
            raise
        raise full from exc


def _run_and_index(packer: Packer, started: float) -> PackSummary:
    """The loop, then the key file with its audit, the index, and the cleanup of what only a resume needed."""
    source, out, options = packer.source, packer.outdir, packer.options
    with RejectsReport(out / REJECTS_NAME, keep_bytes=packer.progress.rejects_bytes) as rejects:
        resumed_from = len(packer.progress.shards)
        packer.run(rejects)
        packer.journal.close()
        progress = packer.progress
        if progress.samples == 0:
            packer.journal.path.unlink(missing_ok=True)
            shutil.rmtree(packer.work, ignore_errors=True)
            skipped = sum(progress.rejected.values())
            raise PackError(
                f"{source}: no samples to pack ({skipped} inputs rejected"
                + (f", see {rejects.path}" if skipped else "")
                + "); no shard was written"
            )
        duplicates = packer.write_key_file(rejects)
        rejects.flush()
        any_rejects = rejects.count_total > 0
    count = len(progress.shards)
    index = DatasetIndex(
        # Past 10^6 shards the names widened on the way (7 digits and more): the rows name them.
        pattern=shard_pattern(options.prefix, count) if shard_digits(count) == shard_digits(1) else None,
        shards=progress.shards,
        fields=progress.fields,
        field_bytes=progress.field_bytes,
        options=packer.output_options,
        rejected={**progress.rejected, **({DUPLICATE_ACROSS_SHARDS: duplicates} if duplicates else {})},
        keys=KEYS_NAME,
        sample_columns={COST: "u8"} if options.cost is not None else {},
        column_sums=progress.column_sums,
        column_tails=progress.whole_tails(),
    )
    index.save(out / INDEX_NAME)
    packer.journal.path.unlink(missing_ok=True)
    shutil.rmtree(packer.work, ignore_errors=True)
    if not any_rejects:
        (out / REJECTS_NAME).unlink(missing_ok=True)
    return summary_from_index(
        out, started, index=index, oversized=progress.oversized, resumed_from_shard=resumed_from
    )
