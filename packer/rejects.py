"""The rejects report: one JSON line (source, reason, kind) per input that was not packed as given."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import TracebackType

from .sample import Reject


class RejectsReport:
    """Append-only JSONL; ``keep_bytes`` truncates to what a resumed run had already reported."""

    def __init__(self, path: Path, *, keep_bytes: int = 0) -> None:
        self.path = path
        mode = "r+b" if keep_bytes and path.exists() else "wb"
        self._handle = open(path, mode)  # noqa: SIM115 - closed in __exit__
        self._handle.truncate(keep_bytes if mode == "r+b" else 0)
        self._handle.seek(0, os.SEEK_END)
        self.count_total = 0
        if mode == "r+b":  # only a kept file has lines to count; a fresh one is write-only
            self._handle.seek(0)
            self.count_total = sum(1 for _ in self._handle)

    def write(self, reject: Reject) -> None:
        line = json.dumps(reject.to_json(), ensure_ascii=False) + "\n"
        self._handle.write(line.encode("utf-8", "surrogateescape"))
        self.count_total += 1

    def flush(self) -> int:
        self._handle.flush()
        os.fsync(self._handle.fileno())
        return self._handle.tell()

    def __enter__(self) -> RejectsReport:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._handle.close()
