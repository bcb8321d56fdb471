"""The pack's key file and cross-shard duplicate audit in one merge of per-shard sorted key runs.

Keys repeated inside one shard are rejected as they arrive (they would merge into one sample on reading).
Catching repeats across shards online would need memory that grows with the dataset, so each shard's
sorted key lines (the key file's own format) go to a small run, and at the end one k-way merge
(``shardstream/indexer/keymerge.py``, as ``shardstream index`` does) writes the key file and, watching the
lines go by, reports the keys held by more than one shard.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from shardstream.errors import PackError
from shardstream.format.keyfile import KeyFileWriter, key_line
from shardstream.indexer.keymerge import merge_runs
from shardstream.io.publish import publishing

from .rejects import RejectsReport
from .sample import Reject
from .summary import DUPLICATE_ACROSS_SHARDS

_PLACE = 17  # a key line's shard and sample (8 + 8 hex) and its LF


def write_keys(path: Path, keys: Mapping[str, int], shard: int) -> int:
    """Shard ``shard``'s run: ``keys`` (key -> sample number) as sorted key lines; returns how many keys
    a key file cannot hold (NUL or LF in them: no lookup, though the shard keeps the sample)."""
    lines = [key_line(key, shard, sample) for key, sample in keys.items()]
    kept = sorted(line for line in lines if line is not None)
    with publishing(path, "wb", durable=False) as handle:
        handle.writelines(kept)
    return len(lines) - len(kept)


def renumber(run: Path, shard: int, out: Path) -> Path:
    """A part's run with its shard's number in the whole dataset (the part numbered it from 0)."""
    with open(run, "rb") as source, open(out, "wb") as target:
        number = b"%08x" % shard
        target.writelines(line[:-_PLACE] + number + line[-9:] for line in source)
    return out


class KeyAudit:
    """Watches the merged key lines: each key held by more than one shard is a reject (or, strict, an
    error), reported once with every shard holding it."""

    def __init__(self, names: Sequence[str], rejects: RejectsReport, *, strict: bool) -> None:
        self.names, self.rejects, self.strict = names, rejects, strict
        self.count = 0

    def watch(self, lines: Iterable[bytes]) -> Iterator[bytes]:
        current: bytes | None = None
        holders: list[int] = []
        for line in lines:
            key = line[: -_PLACE - 1]
            if key != current:
                if len(holders) > 1:
                    self._report(current, holders)  # type: ignore[arg-type]
                current, holders = key, []
            holders.append(int(line[-_PLACE:-9], 16))
            yield line
        if len(holders) > 1:
            self._report(current, holders)  # type: ignore[arg-type]

    def _report(self, raw: bytes, holders: list[int]) -> None:
        self.count += 1
        key = raw.decode("utf-8", "surrogateescape")
        shards = [self.names[number] for number in holders]
        where = f"key is in {len(shards)} shards: {', '.join(shards)} (kept in all)"
        reject = Reject(key, where, DUPLICATE_ACROSS_SHARDS)
        if self.strict:
            raise PackError(f"key {key!r}: {reject.reason} (--strict)")
        self.rejects.write(reject)


def write_key_file(runs: Sequence[Path], path: Path, scratch: Path, audit: KeyAudit) -> int:
    """Merge the shards' runs (in shard order) into the key file at ``path``, auditing on the way; the
    number of keys found in more than one shard."""
    with KeyFileWriter(path) as writer:
        merge_runs([str(run) for run in runs], writer, scratch, watch=audit.watch)
    return audit.count
