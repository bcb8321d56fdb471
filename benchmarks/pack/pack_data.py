"""Packer benchmark, data: the raw folder it packs and the JSONL manifests of the RSS benchmark.

Both are reused on a rerun when a data marker says they were made with the same parameters.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from harness import project
from harness.report import marker_matches, write_marker

POOL_FILES = 100
_WORDS = (
    ("calm", "bright", "dim", "noisy", "soft", "bold"),
    ("red", "green", "blue", "amber", "teal"),
    ("gradient", "sky", "field", "wall", "sunset", "sea", "fog"),
)


def make_raw_folder(root: Path, samples: int, side: int, log: Any) -> Path:
    """``samples`` JPEGs from ``make_jpegs``, each with its .cls and a small .json (3 files each)."""
    params = {"samples": samples, "side": side, "members": ["jpg", "cls", "json"], "seed": 0}
    data = root / "data"
    if marker_matches(root, params):
        return data
    log(f"making the raw folder: {samples} samples of {side}x{side} JPEG + .cls + .json ...")
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    project("make_jpegs")(data, samples, size=(side, side), seed=0)
    for jpg in sorted(data.glob("*/*.jpg")):
        cls = jpg.with_suffix(".cls").read_text().strip()
        meta = {
            "key": f"{jpg.parent.name}/{jpg.stem}",
            "label": int(cls),
            "width": side,
            "height": side,
            "source": "synthetic",
            "split": "train",
        }
        jpg.with_suffix(".json").write_text(json.dumps(meta) + "\n")
    write_marker(root, params)
    log(f"  made in {time.perf_counter() - started:.1f}s")
    return data


def make_manifests(root: Path, sizes: list[int], log: Any) -> dict[int, Path]:
    """JSONL manifests of identical record shape pointing at a pool of ~100 tiny real JPEGs."""
    params = {"sizes": sizes, "pool": POOL_FILES, "shape": "id+image+caption"}
    paths = {n: root / f"manifest-{n}.jsonl" for n in sizes}
    if marker_matches(root, params):
        return paths
    log(f"making manifests of {', '.join(f'{n:,}' for n in sizes)} records over {POOL_FILES} tiny JPEGs ...")
    shutil.rmtree(root, ignore_errors=True)
    project("make_jpegs")(root / "pool", POOL_FILES, size=(32, 32), seed=1)
    pool = sorted(p.relative_to(root).as_posix() for p in (root / "pool").glob("*/*.jpg"))
    for n, path in paths.items():
        with open(path, "w", encoding="utf-8") as handle:
            for i in range(n):
                words = [w[(i // (k + 1)) % len(w)] for k, w in enumerate(_WORDS)]
                caption = f"A {words[0]} {words[1]} {words[2]}, picture {i}."
                record = {"id": f"r{i:09d}", "image": pool[i % len(pool)], "caption": caption}
                handle.write(json.dumps(record) + "\n")
    write_marker(root, params)
    return paths
