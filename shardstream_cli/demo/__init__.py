"""The demo: make a small synthetic multimodal corpus, pack it two ways, stream it back decoded, describe it.

The corpus maker (``synth``) is also what the tests and benchmarks build their data with.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["LAYOUTS", "run_demo"]

LAYOUTS = ("directory", "manifest")


def run_demo(
    workdir: Path | None = None, samples: int = 48, workers: int = 2, say: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Pack ``samples`` synthetic samples from a folder and from a manifest, stream both back; a summary.
    ``say``: told of each step as it starts (the CLI writes them to stderr), with the seconds so far."""
    from packer import PackOptions, pack

    from .synth import make_corpus  # numpy and Pillow: only when the demo runs, not for `--help`

    started = time.monotonic()

    def step(text: str) -> None:
        if say is not None:
            say(f"[{time.monotonic() - started:5.1f}s] {text}")

    with tempfile.TemporaryDirectory(prefix="shardstream-demo-") as tmp:
        root = workdir or Path(tmp)
        step(f"making a corpus of {samples} samples (images, audio, video, text) in {root / 'corpus'}")
        corpus = make_corpus(root / "corpus", samples)
        options = PackOptions(max_size=64 * 1024, overwrite=True)
        result: dict[str, Any] = {"corpus_samples": corpus.samples}
        for layout, source in zip(LAYOUTS, (corpus.files_dir, corpus.manifest), strict=True):
            step(f"packing the {layout} layout into {root / f'shards-{layout}'}")
            summary = pack(source, root / f"shards-{layout}", options, progress=False)
            step(f"streaming it back, decoded, with {workers} DataLoader workers")
            result[layout] = {
                "pattern": summary.pattern,
                "shards": summary.shards,
                "samples_packed": summary.samples,
                "bytes": summary.bytes,
                "skipped": summary.skipped,
                **stream_back(Path(summary.index), workers),
            }
        result["seconds"] = round(time.monotonic() - started, 2)
    return result


def stream_back(index: Path, workers: int) -> dict[str, Any]:
    """Stream a packed dataset back, decoded, through a DataLoader, and describe what came out."""
    from torch.utils.data import DataLoader

    from streamer import ShardDataset

    dataset = ShardDataset(index, image="torch", video_frames=4, buffer_size=16)
    loader = DataLoader(dataset, batch_size=None, num_workers=workers)
    keys, decoded = set(), {}
    for sample in loader:
        keys.add(sample["__key__"])
        for name, value in sample.items():
            if name.startswith("__"):
                continue
            kind = name.rsplit(".", 1)[-1]
            entry = decoded.setdefault(kind, {"count": 0, "example": describe(value)})
            entry["count"] += 1
    return {"samples_read": len(keys), "decoded": dict(sorted(decoded.items())), "errors": dataset.errors}


def describe(value: Any) -> str:
    """A decoded member in a few words: its type and shape."""
    # DataLoader turns (waveform, rate) tuples into lists.
    if isinstance(value, (tuple, list)) and len(value) == 2 and hasattr(value[0], "shape"):
        return f"audio {tuple(value[0].shape)} @ {value[1]} Hz"
    if hasattr(value, "shape"):
        return f"{type(value).__name__} {tuple(value.shape)} {getattr(value, 'dtype', '')}"
    return type(value).__name__
