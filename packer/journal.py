"""The resume journal: one fsynced JSON line per published shard, so a killed pack continues exactly."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shardstream.errors import PackError
from shardstream.format import ShardEntry


@dataclass
class PackProgress:
    """Everything a resumed run needs to continue as if it had never stopped."""

    position: int = 0  # source items consumed into published shards (and rejects before them)
    rejects_bytes: int = 0
    samples: int = 0
    payload_bytes: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    fields: dict[str, int] = field(default_factory=dict)
    oversized: int = 0
    shards: list[ShardEntry] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "rejects_bytes": self.rejects_bytes,
            "samples": self.samples,
            "payload_bytes": self.payload_bytes,
            "rejected": self.rejected,
            "fields": self.fields,
            "oversized": self.oversized,
            "shard": self.shards[-1].to_row() if self.shards else None,
        }


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path

    def start(self, options: dict[str, Any]) -> None:
        with open(self.path, "w", encoding="utf-8") as handle:
            handle.write(json.dumps({"options": options}) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def record(self, progress: PackProgress) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(progress.to_json()) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def load(self, options: dict[str, Any]) -> PackProgress:
        """Read the journal back; refuse when the options differ from the interrupted run's."""
        unreadable = f"{self.path}: unreadable resume journal; start over with --overwrite"
        lines = self.path.read_bytes().splitlines()  # JSON lines hold no raw CR or LF
        try:
            header = json.loads(lines[0])  # bytes: any damage (not UTF-8 either) is a ValueError
        except (IndexError, ValueError) as exc:
            raise PackError(unreadable) from exc
        before = header.get("options", {}) if isinstance(header, dict) else None
        if not isinstance(before, dict):
            raise PackError(unreadable)
        changed = sorted(k for k in set(before) | set(options) if before.get(k) != options.get(k))
        if changed:
            detail = ", ".join(f"{k}: {before.get(k)!r} -> {options.get(k)!r}" for k in changed)
            raise PackError(
                f"cannot --resume with different options ({detail}); rerun with the original options "
                "or start over with --overwrite"
            )
        progress = PackProgress()
        for number, line in enumerate(lines[1:], start=2):
            try:
                entry = json.loads(line)
            except ValueError:
                break  # a line torn by the kill: the shard it names was never recorded, so redo it
            try:
                shard = entry["shard"]
                progress = PackProgress(
                    position=entry["position"],
                    rejects_bytes=entry["rejects_bytes"],
                    samples=entry["samples"],
                    payload_bytes=entry["payload_bytes"],
                    rejected=entry["rejected"],
                    fields=entry["fields"],
                    oversized=entry["oversized"],
                    # None: progress recorded before any shard (every item so far rejected)
                    shards=progress.shards if shard is None else [*progress.shards, ShardEntry(*shard)],
                )
            except (KeyError, TypeError) as exc:  # whole JSON, wrong shape: damage, not a torn line
                raise PackError(
                    f"{self.path}: line {number} is not a journal entry ({type(exc).__name__}: {exc}); "
                    "start over with --overwrite"
                ) from exc
        return progress
