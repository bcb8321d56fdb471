"""Packer benchmark, child side: the Python contenders, each in its fresh interpreter (one JSON line out).

``pack_bench.py --child shardwriter|tarfile --src RAW --out OUT [--child-side N]`` lands in ``run_child``.
Each is timed from inside, after its imports (webdataset alone imports torch, about 1.5 s).
"""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Iterator
from typing import Any

MAX_SIZE = "256MB"  # shard size for every contender: ours gets it as --max-size
MAX_SIZE_BYTES = 256 * 10**6


def iter_samples(root: str) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """(key, [(ext, path)]) in sorted order, files grouped by the name before the first dot, like ours."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel = os.path.relpath(dirpath, root)
        groups: dict[str, list[tuple[str, str]]] = {}
        for name in sorted(filenames):
            key, _, ext = name.partition(".")
            groups.setdefault(key, []).append((ext, os.path.join(dirpath, name)))
        for key, members in groups.items():
            yield (key if rel == "." else f"{rel}/{key}"), members


def reencode_jpeg(data: bytes, side: int, quality: int) -> bytes:
    """The baseline pipeline's image work: open, exif_transpose, LANCZOS thumbnail, JPEG at ``quality``."""
    from PIL import Image, ImageOps

    with Image.open(io.BytesIO(data)) as opened:
        image = ImageOps.exif_transpose(opened)
        image.thumbnail((side, side), Image.Resampling.LANCZOS)
        if image.mode not in ("RGB", "L"):
            image = image.convert("RGB")
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=quality)
    return buffer.getvalue()


def child_shardwriter(src: str, out: str, side: int | None, quality: int) -> float:
    import webdataset as wds

    if side is not None:
        from PIL import Image, ImageOps  # noqa: F401 - import before the clock starts, as wds is

    started = time.perf_counter()
    sink = wds.ShardWriter(
        os.path.join(out, "wds-%06d.tar"), maxsize=MAX_SIZE_BYTES, maxcount=10**9, verbose=0
    )
    try:
        for key, members in iter_samples(src):
            sample: dict[str, Any] = {"__key__": key}
            for ext, path in members:
                with open(path, "rb") as handle:
                    data = handle.read()
                if side is not None and ext == "jpg":
                    data = reencode_jpeg(data, side, quality)
                sample[ext] = data
            sink.write(sample)
    finally:
        sink.close()
    return time.perf_counter() - started


def child_tarfile(src: str, out: str) -> float:
    import tarfile

    started = time.perf_counter()
    with tarfile.open(os.path.join(out, "tarfile.tar"), "w") as tar:
        for key, members in iter_samples(src):
            for ext, path in members:
                tar.add(path, arcname=f"{key}.{ext}", recursive=False)
    return time.perf_counter() - started


def run_child(kind: str, src: str, out: str, side: int | None, quality: int) -> int:
    """Run the child ``kind``; print its seconds as one JSON line."""
    if kind == "shardwriter":
        seconds = child_shardwriter(src, out, side, quality)
    elif kind == "tarfile":
        seconds = child_tarfile(src, out)
    else:
        raise SystemExit(f"unknown child {kind!r}")
    print(json.dumps({"seconds": seconds}))
    return 0
