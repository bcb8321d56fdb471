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
        self.count_total = 0
        if not keep_bytes:
            self._handle = open(path, "wb")  # noqa: SIM115 - closed in __exit__
            return
        # A resume: the pack checked that the file holds at least keep_bytes (else it refused to resume).
        self._handle = open(path, "r+b")  # noqa: SIM115 - closed in __exit__
        self._handle.truncate(keep_bytes)
        self.count_total = sum(1 for _ in self._handle)  # the kept lines, read from the start
        self._handle.seek(0, os.SEEK_END)

    def write(self, reject: Reject) -> None:
        line = json.dumps(reject.to_json(), ensure_ascii=False) + "\n"
        self._handle.write(line.encode("utf-8", "surrogateescape"))
        self.count_total += 1

    def append_report(self, path: Path, nbytes: int) -> None:
        """Copy the first ``nbytes`` of another report (whole lines) after what is here."""
        with open(path, "rb") as source:
            data = source.read(nbytes)
        if len(data) != nbytes:
            raise OSError(f"{path}: holds {len(data)} bytes of rejects, {nbytes} were reported")
        self._handle.write(data)
        self.count_total += data.count(b"\n")

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
