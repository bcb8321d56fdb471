"""Per-shard sorted key runs merged into the dataset's key file, in memory that does not grow with it.

Runs are first strung into chains: a run whose first line sorts at or after the chain's last line simply
follows it, so shards whose keys ascend across shards (what ShardWriter, img2dataset and our packer
write) form one chain, read end to end with no comparison at all. Chains are then merged with
``heapq.merge``, at most 256 at a time (more are merged in rounds through scratch files), so memory is a
line per open chain. The line format (``key NUL shard sample``, fixed-width hex) sorts as plain bytes.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from ..format.keyfile import KeyFileWriter

FAN_IN = 256
_TAIL = 1 << 16


def merge_runs(
    runs: Sequence[str],
    writer: KeyFileWriter,
    scratch: Path,
    remap: Sequence[int] | None = None,
    *,
    watch: Callable[[Iterator[bytes]], Iterable[bytes]] | None = None,
) -> None:
    """Write every line of ``runs`` into ``writer``, sorted; ``remap[shard]`` renumbers shards on the way
    (shards left out of the index shift those after them); ``watch`` sees the merged lines on their way
    in and passes them on (the packer's cross-shard duplicate audit)."""
    lines: Iterable[bytes] = _merged(_chains(runs), scratch)
    if remap is not None:
        lines = (line[:-17] + b"%08x" % remap[int(line[-17:-9], 16)] + line[-9:] for line in lines)
    if watch is not None:
        lines = watch(iter(lines))
    writer.add_all(lines)


def _chains(runs: Sequence[str]) -> list[list[str]]:
    chains: list[list[str]] = []
    last: bytes | None = None
    for run in runs:
        first, final = _ends(run)
        if first is None:
            continue  # an empty run
        if last is None or first < last:
            chains.append([run])
        else:
            chains[-1].append(run)
        last = final
    return chains


def _ends(run: str) -> tuple[bytes | None, bytes | None]:
    """A run's first and last line."""
    with open(run, "rb") as handle:
        first = handle.readline()
        if not first:
            return None, None
        size = os.fstat(handle.fileno()).st_size
        handle.seek(max(0, size - _TAIL))
        tail = handle.read()
    cut = tail.rfind(b"\n", 0, len(tail) - 1)
    if cut < 0 and size > len(tail):  # one line longer than the tail: read it whole
        with open(run, "rb") as handle:
            return first, handle.read().splitlines(keepends=True)[-1]
    return first, tail[cut + 1 :]


def _read_chain(chain: list[str]) -> Iterator[bytes]:
    for run in chain:
        with open(run, "rb") as handle:
            yield from handle


def _merged(chains: list[list[str]], scratch: Path) -> Iterator[bytes]:
    round_number = 0
    while len(chains) > FAN_IN:
        merged = []
        for start in range(0, len(chains), FAN_IN):
            out = scratch / f"merge-{round_number}-{start // FAN_IN:06d}.keys"
            with open(out, "wb") as handle:
                handle.writelines(heapq.merge(*(_read_chain(c) for c in chains[start : start + FAN_IN])))
            merged.append([str(out)])
        chains, round_number = merged, round_number + 1
    if len(chains) == 1:
        yield from _read_chain(chains[0])
    else:
        yield from heapq.merge(*(_read_chain(chain) for chain in chains))
