"""Tar shards as other tools write them, for the index tests: webdataset's ShardWriter and GNU tar."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import webdataset as wds


def payload(i: int, size: int = 300) -> bytes:
    return random.Random(i).randbytes(size + i % 97)


def shardwriter_dataset(
    root: Path, counts: list[int], *, gaps: tuple[int, ...] = ()
) -> dict[str, dict[str, bytes]]:
    """Shards ``w-000000.tar``... of ``counts[i]`` samples (jpg-named bytes, cls, json) written by
    webdataset's ShardWriter (a pax header per member, for its float mtimes); shards in ``gaps`` deleted
    afterwards so the numbering has holes. Returns the surviving samples by key."""
    root.mkdir(parents=True, exist_ok=True)
    samples: dict[str, dict[str, bytes]] = {}
    number = 0
    for shard, count in enumerate(counts):
        with wds.TarWriter(str(root / f"w-{shard:06d}.tar")) as writer:
            for _ in range(count):
                key = f"s{number:07d}"
                sample = {"jpg": payload(number), "cls": b"%d" % (number % 7), "json": b'{"n": %d}' % number}
                writer.write({"__key__": key, **sample})
                if shard not in gaps:
                    samples[key] = sample
                number += 1
    for shard in gaps:
        (root / f"w-{shard:06d}.tar").unlink()
    return samples


def gnu_tar_dataset(root: Path, name: str, count: int, *, start: int = 0) -> dict[str, dict[str, bytes]]:
    """A GNU tar archive of a folder tree (directory entries between samples, as `tar cf` leaves them)."""
    tree = root / f"{name}-tree"
    samples = {}
    for i in range(start, start + count):
        folder = tree / f"part{i // 3}"
        folder.mkdir(parents=True, exist_ok=True)
        data = payload(i, 700)
        (folder / f"{i:05d}.bin").write_bytes(data)
        (folder / f"{i:05d}.txt").write_bytes(b"caption %d" % i)
        samples[f"part{i // 3}/{i:05d}"] = {"bin": data, "txt": b"caption %d" % i}
    subprocess.run(["tar", "--sort=name", "-cf", str(root / f"{name}.tar"), "-C", str(tree), "."], check=True)
    return {f"./{key}": value for key, value in samples.items()}
