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
    """``pattern`` is None when no brace pattern covers the shard names (gaps, arbitrary names): the rows
    name them. Names are relative to the index's folder, or absolute paths or URLs. ``sidecars`` is the
    folder (relative to the index) holding the offsets sidecars under derived names, when they cannot sit
    beside the shards; ``keys`` names the sorted key file for lookup by key. A sha256 may be "" (not
    computed: ``shardstream index`` without ``--checksum``)."""

    pattern: str | None
    shards: list[ShardEntry]
    fields: dict[str, int] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)
    version: int = FORMAT_VERSION
    field_bytes: dict[str, int] = field(default_factory=dict)
    sidecars: str | None = None
    keys: str | None = None

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
        # Only what is set, so that the packer's index stays byte-identical to earlier ones.
        if self.field_bytes:
            head["field_bytes"] = dict(sorted(self.field_bytes.items()))
        if self.sidecars is not None:
            head["sidecars"] = self.sidecars
        if self.keys is not None:
            head["keys"] = self.keys
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
            pattern = doc["pattern"]
            if pattern is not None and not isinstance(pattern, str):
                raise TypeError(f"pattern {pattern!r} is neither a string nor null")
            return cls(
                pattern=pattern,
                shards=shards,
                fields=dict(doc.get("fields", {})),
                options=dict(doc.get("options", {})),
                rejected=dict(doc.get("rejected", {})),
                version=version,
                field_bytes=dict(doc.get("field_bytes", {})),
                sidecars=_relative_folder(doc.get("sidecars"), source),
                keys=_relative_folder(doc.get("keys"), source),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise FormatError(f"{source}: malformed index ({exc!r})") from exc

    @property
    def checksums(self) -> bool:
        """Whether every shard has its sha256 (an index made without ``--checksum`` has none)."""
        return all(entry.sha256 for entry in self.shards)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> DatasetIndex:
        path = Path(path)
        return cls.from_json(path.read_text(encoding="utf-8"), source=str(path))

    def save(self, path: str | os.PathLike[str]) -> None:
        from .atomic import write_atomic

        write_atomic(Path(path), self.to_json().encode("utf-8"))


def _relative_folder(value: Any, source: str) -> str | None:
    """A name the index gives relative to itself: it may not leave the index's folder."""
    if value is None:
        return None
    parts = str(value).replace("\\", "/").split("/")
    if not isinstance(value, str) or not value or value.startswith("/") or ".." in parts or ":" in value:
        raise FormatError(f"{source}: {value!r} must be a plain name relative to the index's folder")
    return value
