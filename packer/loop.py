"""The packing loop: one ordered stream of SOURCE (or of one slice of it) into shards, journaled per shard."""

from __future__ import annotations

import contextlib
import errno
import os
import warnings
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from itertools import islice
from pathlib import Path
from typing import Any

from shardstream.errors import PackError
from shardstream.format import (
    INDEX_NAME,
    REJECTS_NAME,
    DatasetIndex,
    shard_digits,
    shard_name,
)
from shardstream.format.constants import END_OF_ARCHIVE, JOURNAL_NAME, KEYS_NAME, WORK_DIR_NAME
from shardstream.format.samplecols import COST, encoded_size, sample_columns_name
from shardstream.parallel import ordered_map

from .cost import sample_cost
from .journal import Journal, PackProgress
from .keyaudit import KeyAudit, write_key_file, write_keys
from .load import holds_its_bytes, load_batch
from .options import PackOptions
from .outdir import clear_outputs, existing_outputs
from .progress import ProgressHook
from .rejects import RejectsReport
from .sample import Reject, Sample, SamplePlan
from .shardwriter import TarShardWriter, encode_sample
from .sources import Slice, open_source
from .sources.iterable import RecordsSource

# A full disk, a full quota, a file size limit (ulimit -f): the pack stops; what is published stays.
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def no_space(exc: BaseException, outdir: Path, where: str) -> PackError | None:
    """The error to raise for a write refused for want of space, saying where and what to do; else None."""
    if not isinstance(exc, OSError) or exc.errno not in NO_SPACE:
        return None
    return PackError(f"{outdir}: disk full at {where} ({exc.strerror}); free space and rerun with --resume")


class Packer:
    """One ordered stream of SOURCE (or of one slice of it) into shards in OUTDIR, journaled per shard."""

    def __init__(
        self,
        source: str,
        outdir: Path,
        options: PackOptions,
        hook: ProgressHook,
        *,
        part: Slice | None = None,
        journal_options: dict[str, object] | None = None,
        pool: ProcessPoolExecutor | None = None,
        records: Iterable[Any] | None = None,
    ) -> None:
        self.source = source
        self.records = records  # Python records instead of SOURCE (then ``source`` only describes them)
        self.outdir = outdir
        self.options = options
        self.hook = hook
        self.part = part
        self.pool = pool  # loader processes shared with other runs (the parts of a local pack in parts)
        described = source if records is not None else os.path.abspath(source)
        self.output_options = journal_options or options.output_options(described)
        self.journal = Journal(outdir / JOURNAL_NAME)
        self.work = outdir / WORK_DIR_NAME
        self.progress = PackProgress()
        self.writer: TarShardWriter | None = None
        self.writing = 0  # the number of the shard being written (or next), for a disk-full message
        self.consumed = 0  # source items read to the end of the run, the ones after the last shard too

    # -- setup -----------------------------------------------------------------------------------------
    def prepare(self) -> bool:
        """Make OUTDIR ready; return True when a finished pack with these options is already there."""
        self.outdir.mkdir(parents=True, exist_ok=True)
        existing = existing_outputs(self.outdir)
        if existing and self.options.overwrite:
            # Only this dataset's files go; other prefixes' shards in OUTDIR are left as they are.
            clear_outputs(self.outdir, self.options.prefix)
            existing = []
        if self.options.resume and self.journal.path.exists():
            self.progress = self.journal.load(self.output_options)
            self.check_published()
            return False
        if self.options.resume and (self.outdir / INDEX_NAME).exists():
            done = DatasetIndex.load(self.outdir / INDEX_NAME)
            if done.options != self.output_options:
                raise PackError(
                    f"{self.outdir}: holds a finished pack made with other options; use --overwrite"
                )
            return True
        if existing:
            shown = ", ".join(p.name for p in existing[:3]) + (" ..." if len(existing) > 3 else "")
            hint = "nothing to resume (no journal); " if self.options.resume else ""
            raise PackError(
                f"{self.outdir} already holds shards or an index ({shown}); {hint}pass --resume to continue "
                "an interrupted pack, --overwrite to replace it, or choose an empty OUTDIR"
            )
        self.journal.start(self.output_options)
        return False

    def check_published(self) -> None:
        for entry in self.progress.shards:
            path = self.outdir / entry.name
            if not path.exists() or path.stat().st_size != entry.size:
                raise PackError(
                    f"{path}: the journal lists this shard as done ({entry.size} bytes) but it is missing "
                    "or changed; start over with --overwrite"
                )
            cols = path.with_name(sample_columns_name(entry.name))
            size = encoded_size({COST: "u8"}, entry.samples)
            if self.options.cost is not None and (not cols.exists() or cols.stat().st_size != size):
                raise PackError(
                    f"{cols}: the journal lists its shard as done, but its costs are missing or changed; "
                    "start over with --overwrite"
                )
        rejects, kept = self.outdir / REJECTS_NAME, self.progress.rejects_bytes
        if kept and (not rejects.exists() or rejects.stat().st_size < kept):
            raise PackError(
                f"{rejects}: the journal counts {kept} bytes of rejects reported but the file is missing or "
                "shorter; start over with --overwrite"
            )

    # -- the loop --------------------------------------------------------------------------------------
    def run(self, rejects: RejectsReport) -> None:
        o = self.options
        plans = (
            self.records_plans()
            if self.records is not None
            else open_source(
                self.source,
                key_field=o.key_field,
                media_root=o.media_root,
                media_fields=o.media_fields,
                member_naming=o.member_naming,
                manifest_format=o.manifest_format,
                part=self.part,
            )
        )
        media = o.media if o.media.active else None
        # Skipping on resume parses the source but opens no media file.
        remaining = islice(iter(plans), self.progress.position, None)
        inline = None if media is not None else holds_its_bytes
        loaded = ordered_map(
            load_batch, remaining, workers=o.workers, args=(media,), pool=self.pool, inline=inline
        )
        position = self.progress.position
        if position:
            self.hook.resumed(position)
        self.writing = len(self.progress.shards)
        try:
            for item in loaded:
                if isinstance(item, Sample) and self.writer is not None and item.key in self.writer.keys:
                    item = Reject(
                        item.source, f"key {item.key!r} repeats a key already in this shard", "duplicate-key"
                    )
                cost = 0
                if isinstance(item, Sample) and o.cost is not None:
                    found = sample_cost(item, o.cost)
                    item, cost = (found, 0) if isinstance(found, Reject) else (item, found)
                if isinstance(item, Reject):
                    self._reject(item, rejects)
                else:
                    self._write(item, position, rejects, cost)
                position += 1
            if self.writer is not None:
                self._publish(position, rejects)
            self.consumed = position
        except BaseException as exc:
            if self.writer is not None:
                # Closing may fail again on a full disk; the temp file is removed all the same.
                with contextlib.suppress(OSError):
                    self.writer.abort()
            name = shard_name(self.options.prefix, self.writing, shard_digits(self.writing + 1))
            full = no_space(exc, self.outdir, f"shard {self.writing}, {name}")
            if full is not None:
                raise full from exc
            raise

    def records_plans(self) -> Iterable[SamplePlan | Reject]:
        o = self.options
        return RecordsSource(
            self.records,  # type: ignore[arg-type]
            media_root=o.media_root,
            key_field=o.key_field,
            media_fields=o.media_fields,
            member_naming=o.member_naming,
        )

    def _reject(self, reject: Reject, rejects: RejectsReport) -> None:
        if self.options.strict:
            raise PackError(f"{reject.source}: {reject.reason} (--strict stops at the first reject)")
        rejects.write(reject)
        self.progress.rejected[reject.kind] = self.progress.rejected.get(reject.kind, 0) + 1
        self.hook.reject(reject)

    def _write(self, sample: Sample, position: int, rejects: RejectsReport, cost: int = 0) -> None:
        chunks = encode_sample(sample)
        nbytes = sum(len(c) for c in chunks)
        if self.writer is not None and not self.writer.fits(nbytes):
            self._publish(position, rejects)
        if self.writer is None:
            number = self.writing = len(self.progress.shards)
            path = self.outdir / shard_name(self.options.prefix, number, shard_digits(number + 1))
            self.writer = TarShardWriter(
                path,
                max_size=self.options.max_size,
                max_count=self.options.max_count,
                costs=self.options.cost is not None,
            )
        max_size = self.options.max_size
        if max_size is not None and nbytes + END_OF_ARCHIVE > max_size:
            self.progress.oversized += 1
            warnings.warn(
                f"{sample.source}: sample takes {nbytes + END_OF_ARCHIVE} bytes, over max_size={max_size}; "
                f"it gets shard {self.writer.path.name} to itself",
                stacklevel=2,
            )
        self.writer.add(sample.key, chunks, nbytes, cost)
        p = self.progress
        p.samples += 1
        p.payload_bytes += sample.nbytes
        for ext, data in sample.members:
            p.fields[ext] = p.fields.get(ext, 0) + 1
            p.field_bytes[ext] = p.field_bytes.get(ext, 0) + len(data)
        self.hook.sample(nbytes)

    def _publish(self, position: int, rejects: RejectsReport) -> None:
        assert self.writer is not None
        entry = self.writer.close()
        self.work.mkdir(exist_ok=True)
        write_keys(self.work / f"{entry.name}.keys", self.writer.keys, len(self.progress.shards))
        if self.options.cost is not None:
            self.progress.column_sums.setdefault(COST, []).append(self.writer.cost_sum)
            self.progress.column_tails.setdefault(COST, []).append(self.writer.cost_tail)
        self.writer = None
        self.progress.shards.append(entry)
        self.progress.position = position
        self.progress.rejects_bytes = rejects.flush()
        self.journal.record(self.progress)
        self.hook.shard(len(self.progress.shards))

    # -- the end ---------------------------------------------------------------------------------------
    def write_key_file(self, rejects: RejectsReport) -> int:
        """The key file from the shards' runs, reporting keys in more than one shard; how many were."""
        shards = self.progress.shards
        audit = KeyAudit([e.name for e in shards], rejects, strict=self.options.strict)
        scratch = self.work / "merge"
        scratch.mkdir(exist_ok=True)
        runs = [self.work / f"{e.name}.keys" for e in shards]
        return write_key_file(runs, self.outdir / KEYS_NAME, scratch, audit)
