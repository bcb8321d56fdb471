"""A LLaVA-style packed set for tests: two thirds JPEG and one third PNG images, each with a JSON record.

What issue 33's user packed (ShareGPT4V-style sets mix the two). Images are one size, so a batch of them
stacks; each carries its number in its top-left pixel and in its record, so a test can tell them apart.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from packer import PackOptions, pack

SIZE = (40, 30)  # width, height


def write_mixed(folder: Path, n: int = 30, sizes: Sequence[tuple[int, int]] = (SIZE,)) -> Path:
    """``n`` records ``llava-{i:06d}``: ``.png`` when i % 3 == 2, else ``.jpg``; each with a ``.json``.
    Image i is ``sizes[i % len(sizes)]`` (width, height): one size unless asked for several."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        key = f"llava-{i:06d}"
        width, height = sizes[i % len(sizes)]
        pixels = np.full((height, width, 3), 40 + 7 * (i % 30), np.uint8)
        ext = "png" if i % 3 == 2 else "jpg"
        Image.fromarray(pixels).save(folder / f"{key}.{ext}", "PNG" if ext == "png" else "JPEG", quality=95)
        record = {"id": key, "conversations": [{"from": "human", "value": f"picture {i}"}]}
        (folder / f"{key}.json").write_text(json.dumps(record))
    return folder


def pack_mixed(
    root: Path, n: int = 30, max_size: int = 20_000, sizes: Sequence[tuple[int, int]] = (SIZE,)
) -> Path:
    """The mixed set packed under ``root / "shards"`` (several shards); returns the index's path."""
    raw = write_mixed(root / "raw", n, sizes)
    summary = pack(raw, root / "shards", PackOptions(max_size=max_size))
    return Path(summary.index)
