"""The dataset index: one small JSON beside the shards; about 100 bytes per shard, nothing per sample."""

from __future__ import annotations

import json
import os
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import FormatError
from .constants import FORMAT_NAME, FORMAT_VERSION


@dataclass(frozen=True)
class ShardEntry:
    name: str
    samples: int
    size: int
    sha256: str

    def to_row(self) -> list[Any]:
        return [self.name, self.samples, self.size, self.sha256]


@dataclass
class DatasetIndex:
    pattern: str
    shards: list[ShardEntry]
    fields: dict[str, int] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)
    version: int = FORMAT_VERSION

    @property
    def samples(self) -> int:
        return sum(entry.samples for entry in self.shards)

    @property
    def bytes(self) -> int:
        return sum(entry.size for entry in self.shards)

    def sample_counts(self) -> array:
        return array("q", (entry.samples for entry in self.shards))

    def to_json(self) -> str:
        # One shard per line keeps the file greppable and diffable; the rest is small.
        head = {
            "format": FORMAT_NAME,
            "version": self.version,
            "pattern": self.pattern,
            "shard_columns": ["name", "samples", "bytes", "sha256"],
            "totals": {"shards": len(self.shards), "samples": self.samples, "bytes": self.bytes},
            "fields": dict(sorted(self.fields.items())),
            "rejected": dict(sorted(self.rejected.items())),
            "options": self.options,
        }
        lines = [json.dumps(head, sort_keys=False)[:-1] + ', "shards": [']
        rows = [json.dumps(entry.to_row(), separators=(",", ":")) for entry in self.shards]
        lines.append(",\n".join(rows))
        lines.append("]}\n")
        return "\n".join(lines)

    @classmethod
    def from_json(cls, text: str, *, source: str = "index") -> DatasetIndex:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FormatError(f"{source}: not valid JSON ({exc})") from exc
        if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
            raise FormatError(f'{source}: not a {FORMAT_NAME} index (no "format": "{FORMAT_NAME}")')
        version = doc.get("version")
        if version != FORMAT_VERSION:
            raise FormatError(
                f"{source}: index version {version!r}; this shardstream reads version {FORMAT_VERSION}"
            )
        try:
            shards = [ShardEntry(str(n), int(c), int(s), str(h)) for n, c, s, h in doc["shards"]]
            return cls(
                pattern=doc["pattern"],
                shards=shards,
                fields=dict(doc.get("fields", {})),
                options=dict(doc.get("options", {})),
                rejected=dict(doc.get("rejected", {})),
                version=version,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise FormatError(f"{source}: malformed index ({exc!r})") from exc

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> DatasetIndex:
        path = Path(path)
        return cls.from_json(path.read_text(encoding="utf-8"), source=str(path))

    def save(self, path: str | os.PathLike[str]) -> None:
        from .atomic import write_atomic

        write_atomic(Path(path), self.to_json().encode("utf-8"))
