"""The index journal: one JSON line per scanned shard, appended after its sidecars are published.

Each part (``--part i/N``) appends to its own file in the work folder, so parts on several machines can
share one folder; a later run reads them all and scans only what no line covers. A torn last line (a kill
mid-write) is dropped: that shard is scanned again. A shard whose size or mtime changed since its line
was written is scanned again too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..io.journal import JsonLines, changed_options
from ..io.journal import records as journal_records
from ..io.publish import write_atomic

OPTIONS_NAME = "options.json"


def journal_path(work: Path, part: tuple[int, int] | None) -> Path:
    return work / (f"journal-{part[0]:05d}-of-{part[1]:05d}.jsonl" if part else "journal.jsonl")


def index_journal(path: Path) -> JsonLines:
    """A part's journal: each line in the OS's hands at once (a kill -9 loses nothing), fsynced at close."""
    return JsonLines(path, durable=False)


def check_options(work: Path, options: dict[str, Any]) -> None:
    """The first run writes its options; a later one (a resume, another part) must match them."""
    path = work / OPTIONS_NAME
    if path.exists():
        try:
            before = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise FormatError(f"{path}: unreadable ({exc}); delete {work} to start over") from exc
        if before != options:
            changed = changed_options(before, options)
            raise FormatError(
                f"{work} holds an unfinished index with other options ({', '.join(changed)}); "
                f"use the same options to continue it, or delete {work} (or pass --restart) to start over"
            )
        return
    write_atomic(path, json.dumps(options, sort_keys=True).encode("utf-8"))


def load_records(work: Path) -> dict[int, dict[str, Any]]:
    """Every journaled shard of every part, by shard number (a later line for a shard wins)."""
    found: dict[int, dict[str, Any]] = {}
    for path in sorted(work.glob("journal*.jsonl")):
        for _, record in journal_records(path):
            if record is not None:  # None: torn mid-line by a crash of the machine; scanned again
                found[int(record["shard"])] = record
    return found
