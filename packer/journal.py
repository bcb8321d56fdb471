"""The resume journal: one fsynced JSON line per published shard, so a killed pack continues exactly."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shardstream.errors import PackError
from shardstream.format import ShardEntry
from shardstream.io.journal import JsonLines, changed_options, records


@dataclass
class PackProgress:
    """Everything a resumed run needs to continue as if it had never stopped."""

    position: int = 0  # source items consumed into published shards (and rejects before them)
    rejects_bytes: int = 0
    samples: int = 0
    payload_bytes: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    fields: dict[str, int] = field(default_factory=dict)
    field_bytes: dict[str, int] = field(default_factory=dict)  # payload bytes per member extension
    oversized: int = 0
    shards: list[ShardEntry] = field(default_factory=list)
    column_sums: dict[str, list[int]] = field(default_factory=dict)  # per-sample column -> each shard's sum
    column_tails: dict[str, list[list[int]]] = field(default_factory=dict)  # and each shard's largest values

    def whole_tails(self) -> dict[str, list[list[int]]]:
        """The tails of every shard: a column resumed from an older journal (no tails for its first
        shards) has none, and its readers read the sidecars instead."""
        return {k: v for k, v in self.column_tails.items() if len(v) == len(self.shards)}

    def to_json(self) -> dict[str, Any]:
        # A column's sum for the last shard only, as its row: the load rebuilds the lists line by line.
        sums = {name: values[-1] for name, values in self.column_sums.items() if values}
        tails = {name: values[-1] for name, values in self.column_tails.items() if values}
        return {
            "position": self.position,
            "rejects_bytes": self.rejects_bytes,
            "samples": self.samples,
            "payload_bytes": self.payload_bytes,
            "rejected": self.rejected,
            "fields": self.fields,
            "field_bytes": self.field_bytes,
            "oversized": self.oversized,
            "shard": self.shards[-1].to_row() if self.shards else None,
            **({"column_sums": sums} if sums else {}),
            **({"column_tails": tails} if tails else {}),
        }


class Journal:
    """The pack's journal at ``path``: a header with the options, then a line per published shard, each
    fsynced (``shardstream/io/journal.py``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lines = JsonLines(path, durable=True)

    def start(self, options: dict[str, Any]) -> None:
        self._lines.start({"options": options})

    def record(self, progress: PackProgress) -> None:
        self._lines.append(progress.to_json())

    def close(self) -> None:
        self._lines.close()

    def load(self, options: dict[str, Any]) -> PackProgress:
        """Read the journal back; refuse when the options differ from the interrupted run's."""
        unreadable = f"{self.path}: unreadable resume journal; start over with --overwrite"
        lines = records(self.path)
        header = next(lines, (0, None))[1]
        before = header.get("options", {}) if isinstance(header, dict) else None
        if not isinstance(before, dict):
            raise PackError(unreadable)
        changed = changed_options(before, options)
        if changed:
            detail = ", ".join(f"{k}: {before.get(k)!r} -> {options.get(k)!r}" for k in changed)
            raise PackError(
                f"cannot --resume with different options ({detail}); rerun with the original options "
                "or start over with --overwrite"
            )
        progress = PackProgress()
        for number, entry in lines:
            if entry is None:
                break  # a line torn by the kill: the shard it names was never recorded, so redo it
            try:
                shard = entry["shard"]
                sums, tails = progress.column_sums, progress.column_tails
                if shard is not None and "column_sums" in entry:
                    sums = {k: [*sums.get(k, []), int(v)] for k, v in entry["column_sums"].items()}
                if shard is not None and "column_tails" in entry:
                    tails = {
                        k: [*tails.get(k, []), [int(x) for x in v]] for k, v in entry["column_tails"].items()
                    }
                progress = PackProgress(
                    position=entry["position"],
                    rejects_bytes=entry["rejects_bytes"],
                    samples=entry["samples"],
                    payload_bytes=entry["payload_bytes"],
                    rejected=entry["rejected"],
                    fields=entry["fields"],
                    # absent from a journal an older packer wrote: counted from here on, not before
                    field_bytes=entry.get("field_bytes", {}),
                    oversized=entry["oversized"],
                    # None: progress recorded before any shard (every item so far rejected)
                    shards=progress.shards if shard is None else [*progress.shards, ShardEntry(*shard)],
                    column_sums=sums,
                    column_tails=tails,
                )
            except (
                KeyError,
                TypeError,
                ValueError,
                AttributeError,
            ) as exc:  # whole JSON, wrong shape: damage, not a torn line
                raise PackError(
                    f"{self.path}: line {number} is not a journal entry ({type(exc).__name__}: {exc}); "
                    "start over with --overwrite"
                ) from exc
        return progress
