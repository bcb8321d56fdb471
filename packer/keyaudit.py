"""Cross-shard duplicate keys, found with bounded memory: per-shard sorted key files, merged at the end.

Keys repeated inside one shard are rejected as they arrive (they would merge into one sample on reading).
Catching repeats across shards online would need memory that grows with the dataset, so each shard's
sorted keys go to a small file and a k-way merge reports the repeats once packing is done.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from shardstream.errors import PackError
from shardstream.io.publish import publishing

from .rejects import RejectsReport
from .sample import Reject
from .summary import DUPLICATE_ACROSS_SHARDS

_MAX_OPEN = 256


def write_keys(path: Path, keys: Iterable[str]) -> None:
    with publishing(path, "w", durable=False, encoding="utf-8", errors="surrogateescape") as handle:
        handle.writelines(f"{key}\n" for key in sorted(keys))


def _read(path: Path, tag: str) -> Iterator[tuple[str, str]]:
    with open(path, encoding="utf-8", errors="surrogateescape") as handle:
        for line in handle:
            yield line[:-1], tag


def _merge_to_file(streams: list[Iterator[tuple[str, str]]], out: Path) -> None:
    with open(out, "w", encoding="utf-8", errors="surrogateescape") as handle:
        for key, tag in heapq.merge(*streams):
            handle.write(f"{key}\t{tag}\n")


def _read_tagged(path: Path) -> Iterator[tuple[str, str]]:
    with open(path, encoding="utf-8", errors="surrogateescape") as handle:
        for line in handle:
            key, _, tag = line[:-1].rpartition("\t")
            yield key, tag


def find_duplicates(key_files: list[tuple[Path, str]], scratch: Path) -> Iterator[tuple[str, list[str]]]:
    """Yield (key, shards holding it) for every key found in more than one shard.

    ``key_files`` pairs each sorted key file with its shard name. More than 256 files are merged in rounds
    through scratch files, as many rounds as it takes, so the number of open files stays bounded at any
    number of shards.
    """
    # Streams are made per group as it is merged, so that none is held for a file not yet open.
    opened: Callable[[int, int], list[Iterator[tuple[str, str]]]]
    opened = lambda lo, hi: [_read(path, tag) for path, tag in key_files[lo:hi]]  # noqa: E731
    count, round_number = len(key_files), 0
    while count > _MAX_OPEN:
        merged: list[Path] = []
        for start in range(0, count, _MAX_OPEN):
            merged.append(scratch / f"merge-{round_number}-{start // _MAX_OPEN:06d}.tsv")
            _merge_to_file(opened(start, start + _MAX_OPEN), merged[-1])
        opened = lambda lo, hi, merged=merged: [_read_tagged(path) for path in merged[lo:hi]]  # noqa: E731
        count, round_number = len(merged), round_number + 1
    streams = opened(0, count)
    current: str | None = None
    holders: list[str] = []
    for key, tag in heapq.merge(*streams):
        if key != current:
            if len(holders) > 1:
                yield current, holders  # type: ignore[misc]
            current, holders = key, []
        holders.append(tag)
    if len(holders) > 1:
        yield current, holders  # type: ignore[misc]


def audit_keys(files: list[tuple[Path, str]], scratch: Path, rejects: RejectsReport, *, strict: bool) -> int:
    """Report every key held by more than one shard (``files``: sorted key file, shard name); the count."""
    count = 0
    for key, holders in find_duplicates(files, scratch):
        count += 1
        where = f"key is in {len(holders)} shards: {', '.join(holders)} (kept in all)"
        reject = Reject(key, where, DUPLICATE_ACROSS_SHARDS)
        if strict:
            raise PackError(f"key {key!r}: {reject.reason} (--strict)")
        rejects.write(reject)
    return count
