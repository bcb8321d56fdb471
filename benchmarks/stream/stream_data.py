"""Streamer benchmark, data: the two datasets it reads, made with the packer, and the 10M-shard folder.

``make_tiny``: JSON-only records (57-62 bytes each) packed from a JSONL manifest; ``make_jpeg``: synthetic
JPEGs with a ``.cls`` each, packed from their folder; both into 10 shards, reused on a rerun when a data
marker says they were made with the same parameters. ``make_many``: a folder for a 10,000,000-shard brace
pattern where only the shards at the epoch's first positions exist (symlinks to the tiny dataset's).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import project
from harness.report import marker_matches, write_marker

MANY_SHARDS = 10_000_000
MANY_DIGITS = 7  # train-{0000000..9999999}.tar
LINKED_POSITIONS = 3  # shard positions of the 10M pattern made real (the reader needs only the first)


@dataclass
class Packed:
    root: Path
    index: str
    pattern: str  # absolute brace pattern, for webdataset
    shards: list[str]
    samples: int
    bytes: int


def _packed(out: Path) -> Packed:
    index_name = project("INDEX_NAME")
    index = project("DatasetIndex").load(out / index_name)
    shards = [str(out / entry.name) for entry in index.shards]
    return Packed(out, str(out / index_name), str(out / index.pattern), shards, index.samples, index.bytes)


def _make(root: Path, params: dict[str, Any], what: str, build: Callable[[], None], log: Any) -> Packed:
    """Reuse ``root/packed`` when its marker matches ``params``; else rebuild ``root`` with ``build``."""
    out = root / "packed"
    if marker_matches(root, params):
        return _packed(out)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    log(f"making the {what}, packed into 10 shards ...")
    started = time.perf_counter()
    build()
    write_marker(root, params)
    log(f"  done in {time.perf_counter() - started:.0f}s")
    return _packed(out)


def make_tiny(root: Path, samples: int, log: Any) -> Packed:
    """``samples`` JSON-only records (57-62 bytes each) packed from a JSONL manifest into 10 shards."""

    def build() -> None:
        manifest = root / "tiny.jsonl"
        with open(manifest, "w", encoding="utf-8") as handle:
            for i in range(samples):
                record = {"id": f"t{i:09d}", "text": f"tiny sample {i}", "label": i % 10}
                handle.write(json.dumps(record) + "\n")
        options = project("PackOptions")(max_size=None, max_count=-(-samples // 10))
        project("pack")(manifest, root / "packed", options)
        manifest.unlink()

    params = {"samples": samples, "shards": 10, "kind": "tiny-json", "v": 1}
    return _make(root, params, f"tiny dataset: {samples:,} JSON records", build, log)


def make_jpeg(root: Path, samples: int, side: int, log: Any) -> Packed:
    """``samples`` synthetic JPEGs (``make_jpegs``) with a .cls each, packed into 10 shards."""

    def build() -> None:
        project("make_jpegs")(root / "raw", samples, size=(side, side), seed=0)
        options = project("PackOptions")(max_size=None, max_count=-(-samples // 10))
        project("pack")(root / "raw", root / "packed", options)
        shutil.rmtree(root / "raw")

    params = {"samples": samples, "side": side, "shards": 10, "kind": "jpeg", "seed": 0, "v": 1}
    return _make(root, params, f"JPEG dataset: {samples:,} {side}x{side} JPEGs + .cls", build, log)


def make_many(root: Path, tiny: Packed) -> dict[str, Any]:
    """A folder for the pattern ``train-{0000000..9999999}.tar`` where only the shards at the first few
    positions of the epoch exist, both unshuffled (0, 1, 2) and shuffled with seed 0, epoch 0 (where the
    Feistel permutation puts positions 0, 1, 2): symlinks to the tiny dataset's shards."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    permutation = project("Permutation")(MANY_SHARDS, 0, 0)
    linked: dict[str, list[int]] = {"shuffle=False": [], "shuffle=True": []}
    for position in range(LINKED_POSITIONS):
        for label, number in (("shuffle=False", position), ("shuffle=True", permutation(position))):
            linked[label].append(number)
            link = root / f"train-{number:0{MANY_DIGITS}d}.tar"
            if not link.exists():
                link.symlink_to(tiny.shards[position % len(tiny.shards)])
    last = MANY_SHARDS - 1
    end = root / f"train-{last:0{MANY_DIGITS}d}.tar"  # a dataset checks a local pattern's ends when made
    if not end.exists():
        end.symlink_to(tiny.shards[0])
    pattern = str(root / f"train-{{{0:0{MANY_DIGITS}d}..{last:0{MANY_DIGITS}d}}}.tar")
    return {"pattern": pattern, "linked_shard_numbers": linked, "files": len(list(root.iterdir()))}
