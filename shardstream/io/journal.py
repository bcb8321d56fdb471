"""The one JSON-lines journal: append a record a line, read back what a kill left whole, compare options.

The packer journals each published shard and the indexer each scanned one; both resume from what the
journal holds. A line is whole only with its LF: the last piece of a file killed mid-write lacks it and
is dropped (its work is done again). ``durable=True`` fsyncs every line (the packer's, one a shard: a power
cut loses nothing recorded); ``durable=False`` hands each line to the OS (a killed process loses nothing,
a power cut may lose the last lines) and fsyncs at ``close()`` (the indexer's, one a scanned shard).
Trade-off: a line per record rewrites nothing, at the price of reading the whole file on resume.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any


class JsonLines:
    """Append-only JSON lines at ``path``; ``durable``: fsync each line (else flush, and fsync at close)."""

    def __init__(self, path: Path, *, durable: bool) -> None:
        self.path, self.durable = Path(path), durable
        self._handle: IO[str] | None = None

    def start(self, first: Mapping[str, Any]) -> None:
        """Begin the file afresh with one record (a header: the options of the run)."""
        self.close()
        with open(self.path, "w", encoding="utf-8") as handle:
            handle.write(_line(first))
            handle.flush()
            os.fsync(handle.fileno())  # appends then open the file O_APPEND: they land after anything

    def append(self, record: Mapping[str, Any]) -> None:
        if self._handle is None:
            self._handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._handle.write(_line(record))
        self._handle.flush()
        if self.durable:
            os.fsync(self._handle.fileno())

    def close(self) -> None:
        if self._handle is not None:
            os.fsync(self._handle.fileno())
            self._handle.close()
            self._handle = None


def _line(record: Mapping[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":")) + "\n"


def whole_lines(path: Path) -> list[bytes]:
    """The lines of ``path`` that end in LF (a kill mid-write leaves the last one without it)."""
    return path.read_bytes().split(b"\n")[:-1]


def records(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number from 1, the parsed record or None when the line is not JSON) for each whole line."""
    for number, line in enumerate(whole_lines(path), start=1):
        try:
            yield number, json.loads(line)  # bytes: damage, not UTF-8 either, is a ValueError
        except ValueError:
            yield number, None


def changed_options(before: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """The option names whose values differ (or that only one side has), sorted."""
    return sorted(key for key in set(before) | set(now) if before.get(key) != now.get(key))
