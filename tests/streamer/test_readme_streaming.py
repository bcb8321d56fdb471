"""The README's first streaming example, run verbatim on a packed LLaVA-style set of JPEGs and PNGs.

The code block under "## Streaming" is taken from README.md as it is; only its dataset path is replaced by
the packed set's. Issue 33: on such a mixed set the example's first batch raised a KeyError in collate;
and on images of many sizes (as real sets are) `image_size=256` kept them apart (it only reduces, to a
shorter side of at least 256), so collate could not stack them.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from tests.streamer.mixedset import pack_mixed

README = Path(__file__).resolve().parents[2] / "README.md"
DATASET = '"shards/shardstream-index.json"'
EXACT = (224, 224)  # the example's image_size: (height, width), exactly


def streaming_example() -> str:
    """The first python block after the "## Streaming" heading."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("\n## Streaming: `streamer.ShardDataset`") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "README's streaming section has no python block"
    return code.group(1)


def run_example(index: Path) -> dict:
    """The example, verbatim but for its dataset path; its names after the run (the last batch too)."""
    code = streaming_example()
    assert code.count(DATASET) == 1, f"the example's dataset path is not {DATASET} any more"
    namespace: dict = {"__name__": "readme_example"}
    exec(compile(code.replace(DATASET, repr(str(index))), str(README), "exec"), namespace)
    return namespace


def test_the_readme_streaming_example_runs_on_a_mixed_jpeg_png_set(tmp_path):
    namespace = run_example(pack_mixed(tmp_path, n=30))
    batch, ds = namespace["batch"], namespace["ds"]  # the last batch of the last epoch
    images = batch["image"]  # stacked under the canonical name, whichever member each sample had
    assert isinstance(images, torch.Tensor) and tuple(images.shape[1:]) == (3, *EXACT)
    assert len(batch["meta"]) == len(batch["__key__"]) == images.shape[0]
    assert len(ds) == 30


def test_the_readme_streaming_example_stacks_images_of_many_sizes(tmp_path):
    sizes = [(530, 223), (300, 400), (256, 256), (640, 480), (97, 300)]  # (width, height)
    namespace = run_example(pack_mixed(tmp_path, n=30, max_size=200_000, sizes=sizes))
    images = namespace["batch"]["image"]
    assert isinstance(images, torch.Tensor) and tuple(images.shape[1:]) == (3, *EXACT)
