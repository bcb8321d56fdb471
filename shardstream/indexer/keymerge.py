"""Per-shard sorted key runs merged into the dataset's key file, in bounded memory.

Runs that fit in 32 MiB together are sorted in memory (Timsort over presorted runs is close to a
concatenation); more are merged with ``heapq.merge`` in rounds of at most 256 open files. The line format
(``key NUL shard sample``, fixed-width hex) sorts as plain bytes, so no line is parsed to be compared.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path

from ..format.keyfile import KeyFileWriter

IN_MEMORY = 32 << 20
FAN_IN = 256


def merge_runs(
    runs: Sequence[str], writer: KeyFileWriter, scratch: Path, remap: Sequence[int] | None = None
) -> None:
    """Write every line of ``runs`` into ``writer``, sorted; ``remap[shard]`` renumbers shards on the way
    (shards left out of the index shift those after them)."""
    lines = _merged(list(runs), scratch)
    if remap is not None:
        lines = (line[:-17] + b"%08x" % remap[int(line[-17:-9], 16)] + line[-9:] for line in lines)
    writer.add_all(lines)


def _merged(runs: list[str], scratch: Path) -> Iterator[bytes]:
    if sum(os.path.getsize(run) for run in runs) <= IN_MEMORY:
        lines: list[bytes] = []
        for run in runs:
            with open(run, "rb") as handle:
                lines.extend(handle.read().splitlines(keepends=True))
        lines.sort()
        yield from lines
        return
    round_number = 0
    while len(runs) > FAN_IN:
        merged = []
        for start in range(0, len(runs), FAN_IN):
            out = scratch / f"merge-{round_number}-{start // FAN_IN:06d}.keys"
            with open(out, "wb") as handle:
                handle.writelines(_heap_merge(runs[start : start + FAN_IN]))
            merged.append(str(out))
        runs, round_number = merged, round_number + 1
    yield from _heap_merge(runs)


def _heap_merge(runs: Sequence[str]) -> Iterator[bytes]:
    with ExitStack() as stack:
        handles = [stack.enter_context(open(run, "rb")) for run in runs]
        yield from heapq.merge(*handles)
