"""The dataset index: JSON beside the shards; rows inline (greppable) or, past 16k shards, binary columns."""

from __future__ import annotations

import hashlib
import json
import os
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import FormatError
from .columns import ShardColumns, columns_name, encode_columns
from .constants import COLUMNS_THRESHOLD, FORMAT_NAME, FORMAT_VERSION, FORMAT_VERSION_COLUMNS
from .entry import ShardEntry
from .samplecols import INTEGER_DTYPES, check_column_name, check_dtype
from .tails import check_tails

__all__ = ["COLUMNS_THRESHOLD", "DatasetIndex", "ReadColumns", "ShardEntry"]

ReadColumns = Callable[[str], "bytes | None"]  # a name beside the index -> that file's bytes, None if absent
_REBUILD = "restore the columns file saved with this index, or rebuild the index (shardstream index / pack)"


@dataclass
class DatasetIndex:
    """``pattern`` is None when no brace pattern covers the shard names (gaps, arbitrary names): the rows
    name them. Names are relative to the index's folder, or absolute paths or URLs. ``sidecars`` is the
    folder (relative to the index) holding the offsets sidecars under derived names, when they cannot sit
    beside the shards; ``keys`` names the sorted key file for lookup by key. A sha256 may be "" (not
    computed: ``shardstream index`` without ``--checksum``).

    ``save`` writes version 1 (a JSON row per shard) up to COLUMNS_THRESHOLD shards, version 2 beyond
    (the shards in a binary columns file beside the index, ``format/columns.py``). Loaded from version 2,
    ``shards`` is a read-only ShardColumns that makes each ShardEntry on ``[i]``, never all of them.

    ``sample_columns``: the per-sample columns every shard has in its ``.cols`` file (name -> dtype code,
    ``format/samplecols.py``; empty: none). ``column_sums``: per integer column, each shard's total in
    shard order, so a planner knows every shard's cost without reading a sidecar. Both are saved only when
    set; version 2 keeps the sums in the JSON too (8 digits a shard and column: fine to ~10^6 shards).
    ``column_tails``: per column with sums, each shard's TAIL_SIZE largest values, largest first
    (``format/tails.py``): a planner knows which samples pass a budget from them alone. Absent from an
    index written before them; a reader then reads the sidecars."""

    pattern: str | None
    shards: Sequence[ShardEntry]
    fields: dict[str, int] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)
    version: int = FORMAT_VERSION
    field_bytes: dict[str, int] = field(default_factory=dict)
    sidecars: str | None = None
    keys: str | None = None
    sample_columns: dict[str, str] = field(default_factory=dict)
    column_sums: dict[str, list[int]] = field(default_factory=dict)
    column_tails: dict[str, list[list[int]]] = field(default_factory=dict)

    @property
    def samples(self) -> int:
        return sum(self.sample_counts())

    @property
    def bytes(self) -> int:
        return sum(self.shard_sizes())

    def sample_counts(self) -> array:
        if isinstance(self.shards, ShardColumns):
            return self.shards.integers("samples")
        return array("q", (entry.samples for entry in self.shards))

    def shard_sizes(self) -> array:
        if isinstance(self.shards, ShardColumns):
            return self.shards.integers("bytes")
        return array("q", (entry.size for entry in self.shards))

    @property
    def checksums(self) -> bool:
        """Whether every shard has its sha256 (an index made without ``--checksum`` has none)."""
        if isinstance(self.shards, ShardColumns):
            return self.shards.all_sha256
        return all(entry.sha256 for entry in self.shards)

    def _head(self, version: int) -> dict[str, Any]:
        head = {
            "format": FORMAT_NAME,
            "version": version,
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
        if self.sample_columns:
            head["sample_columns"] = dict(self.sample_columns)
        if self.column_sums:
            head["column_sums"] = {name: list(sums) for name, sums in self.column_sums.items()}
        if self.column_tails:
            head["column_tails"] = {
                name: [list(t) for t in tails] for name, tails in self.column_tails.items()
            }
        return head

    def to_json(self) -> str:
        """Version 1: one shard per line keeps the file greppable and diffable; the rest is small."""
        lines = [json.dumps(self._head(FORMAT_VERSION), sort_keys=False)[:-1] + ', "shards": [']
        rows = [json.dumps(entry.to_row(), separators=(",", ":")) for entry in self.shards]
        lines.append(",\n".join(rows))
        lines.append("]}\n")
        return "\n".join(lines)

    def to_json_with_columns(self, columns: dict[str, Any]) -> str:
        """Version 2: the metadata, and ``columns`` ({"name", "bytes", "sha256"}) naming the columns file."""
        head = {**self._head(FORMAT_VERSION_COLUMNS), "columns": columns}
        lines = [f" {json.dumps(key)}: {json.dumps(value)}" for key, value in head.items()]  # a key a line
        return "{\n" + ",\n".join(lines) + "\n}\n"

    @classmethod
    def from_json(
        cls, text: str, *, source: str = "index", read_columns: ReadColumns | None = None
    ) -> DatasetIndex:
        """``read_columns`` reads a file beside the index (for version 2): a name in, bytes or None out."""
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FormatError(f"{source}: not valid JSON ({exc})") from exc
        if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
            raise FormatError(f'{source}: not a {FORMAT_NAME} index (no "format": "{FORMAT_NAME}")')
        version = doc.get("version")
        if version not in (FORMAT_VERSION, FORMAT_VERSION_COLUMNS) or isinstance(version, bool):
            raise FormatError(
                f"{source}: index version {version!r}; this shardstream reads versions "
                f"{FORMAT_VERSION} and {FORMAT_VERSION_COLUMNS}"
            )
        try:
            pattern = doc["pattern"]
            if pattern is not None and not isinstance(pattern, str):
                raise TypeError(f"pattern {pattern!r} is neither a string nor null")
            shards: Sequence[ShardEntry]
            if version == FORMAT_VERSION:
                shards = [ShardEntry(str(n), int(c), int(s), str(h)) for n, c, s, h in doc["shards"]]
            else:
                shards = _read_columns(doc, pattern, source, read_columns)
            sample_columns, column_sums = _sample_columns(doc, len(shards), source)
            counts = (
                shards.integers("samples")
                if isinstance(shards, ShardColumns)
                else [e.samples for e in shards]
            )
            column_tails = check_tails(doc.get("column_tails", {}), column_sums, counts, source)
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
                sample_columns=sample_columns,
                column_sums=column_sums,
                column_tails=column_tails,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise FormatError(f"{source}: malformed index ({exc!r})") from exc

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> DatasetIndex:
        path = Path(path)

        def beside(name: str) -> bytes | None:
            try:
                return (path.parent / name).read_bytes()
            except FileNotFoundError:
                return None

        return cls.from_json(path.read_text(encoding="utf-8"), source=str(path), read_columns=beside)

    def save(self, path: str | os.PathLike[str], *, columns: bool | None = None) -> None:
        """Version 2 with ``columns=True``, or by default past COLUMNS_THRESHOLD shards: the columns file is
        published first, the JSON naming it last (each atomically). Version 1 removes a columns file an
        earlier save left under this index's name."""
        from ..io.publish import write_atomic

        path = Path(path)
        beside = path.with_name(columns_name(path.name))
        if not (len(self.shards) > COLUMNS_THRESHOLD if columns is None else columns):
            write_atomic(path, self.to_json().encode("utf-8"))
            beside.unlink(missing_ok=True)
            return
        held = self.shards
        if isinstance(held, ShardColumns) and held.pattern == self.pattern:
            data = held.data  # loaded from columns, names as they were: the same bytes
        else:
            data = encode_columns(self.shards, self.pattern)
        write_atomic(beside, data)
        record = {"name": beside.name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        write_atomic(path, self.to_json_with_columns(record).encode("utf-8"))


def _read_columns(
    doc: dict[str, Any], pattern: str | None, source: str, read: ReadColumns | None
) -> ShardColumns:
    """A version-2 index's columns file, checked against the size and sha256 the index records for it."""
    record = doc["columns"]
    name = _relative_folder(record["name"], source)
    size, sha256 = int(record["bytes"]), str(record["sha256"])
    where = _beside(source, str(name))
    if read is None:
        raise FormatError(
            f"{source}: a version-2 index keeps its shards in {where}; read it with "
            "DatasetIndex.load(path) or pass read_columns"
        )
    data = read(str(name))
    if data is None:
        raise FormatError(
            f"{where}: missing; the index {source} keeps its shards there (copy the two files "
            "together), or rebuild the index (shardstream index / pack)"
        )
    if len(data) != size:
        raise FormatError(
            f"{where}: {len(data)} bytes, the index {source} says {size} (truncated, or saved "
            f"with another index): {_REBUILD}"
        )
    if hashlib.sha256(data).hexdigest() != sha256:
        raise FormatError(
            f"{where}: sha256 differs from the one the index {source} records (damaged, or "
            f"saved with another index): {_REBUILD}"
        )
    columns = ShardColumns(data, pattern=pattern, source=where)
    totals = doc.get("totals")
    counted = totals.get("shards") if isinstance(totals, dict) else None
    if counted is not None and counted != len(columns):
        raise FormatError(f"{where}: {len(columns)} shards, the index {source} says {counted}: {_REBUILD}")
    return columns


def _sample_columns(
    doc: dict[str, Any], count: int, source: str
) -> tuple[dict[str, str], dict[str, list[int]]]:
    """The declared per-sample columns and their per-shard sums, checked: names and dtypes as the sidecar
    layout allows, one non-negative integer a shard, sums only for declared integer columns."""
    declared, sums = doc.get("sample_columns", {}), doc.get("column_sums", {})
    if not isinstance(declared, dict) or not isinstance(sums, dict):
        raise FormatError(f"{source}: sample_columns and column_sums must be objects")
    for name, dtype in declared.items():
        check_dtype(check_column_name(name, source=source), dtype, source=source)
    for name, values in sums.items():
        if declared.get(name) not in INTEGER_DTYPES:
            raise FormatError(f"{source}: column_sums has {name!r}, not a declared integer column")
        if not isinstance(values, list) or len(values) != count:
            shown = len(values) if isinstance(values, list) else type(values).__name__
            raise FormatError(f"{source}: column_sums[{name!r}] has {shown} sums for {count} shards")
        bad = next((v for v in values if isinstance(v, bool) or not isinstance(v, int) or v < 0), None)
        if bad is not None:
            raise FormatError(f"{source}: column_sums[{name!r}] holds {bad!r}, not a non-negative integer")
    return dict(declared), {name: list(values) for name, values in sums.items()}


def _beside(source: str, name: str) -> str:
    """``name`` in the folder of ``source`` (a path or URL), for messages."""
    cut = max(source.rfind("/"), source.rfind("\\"))
    return source[: cut + 1] + name


def _relative_folder(value: Any, source: str) -> str | None:
    """A name the index gives relative to itself: it may not leave the index's folder."""
    if value is None:
        return None
    parts = str(value).replace("\\", "/").split("/")
    if not isinstance(value, str) or not value or value.startswith("/") or ".." in parts or ":" in value:
        raise FormatError(f"{source}: {value!r} must be a plain name relative to the index's folder")
    return value
