"""The children of ``one_chain_bench.py``: each runs in a fresh interpreter with ``PYTHONPATH=<checkout>``
and prints one JSON line, so one script measures any version of the code that exports
``from streamer import ShardDataset, Mixture`` (the old flat layout and the current one alike).

    python benchmarks/stream/one_chain_children.py make '{"data": DIR}'   # packs the data, once
    python benchmarks/stream/one_chain_children.py memory '{"contender": "shard", "index": ..., "dir": ...}'
    python benchmarks/stream/one_chain_children.py speed '{"contender": "mixture", "index": ..., "buffer": N}'
    python benchmarks/stream/one_chain_children.py small '{"sources": [...], "watch": SHARD_PATH}'
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import io
import itertools
import json
import os
import resource
import shutil
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

JPEGS, JPEG_SIDE, JPEG_SHARD_BYTES = 2000, 512, 64 * 10**6
TINY_SETS = {  # name -> (samples, samples per shard)
    "speed": (12_000, 1000),
    "tiny": (7, 7),
    "mid": (1000, 500),
    "big": (50_000, 5000),
}
DATA_VERSION = 1


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kB


def _jpeg(i: int, rng: Any) -> bytes:
    """A 512x512 JPEG (quality 90) of a gradient with waves and blurred noise: 70-85 KB, unlike the others."""
    import numpy as np
    from PIL import Image, ImageFilter

    y, x = np.mgrid[0:JPEG_SIDE, 0:JPEG_SIDE]
    base = (x * (i % 7 + 1) / 4 + y / 3 + 40 * np.sin(x / (17 + i % 29)) * np.cos(y / (23 + i % 31))) % 256
    pixels = base[..., None] + rng.normal(0, 28, (JPEG_SIDE, JPEG_SIDE, 3)) + rng.integers(0, 80, 3)
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).filter(ImageFilter.GaussianBlur(0.8))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90)
    return out.getvalue()


def _sample_bytes(folder: Path) -> list[int]:
    """The raw member bytes of each sample in the packed ``folder``'s shards (what a buffer holds)."""
    sizes: dict[str, int] = collections.defaultdict(int)
    for shard in sorted(folder.glob("*.tar")):
        with tarfile.open(shard) as tar:
            for member in tar:
                sizes[member.name.split(".", 1)[0]] += member.size
    return list(sizes.values())


def make(spec: dict[str, Any]) -> dict[str, Any]:
    """Every data set, packed by this checkout's packer from a folder of raw files; reused when made."""
    import numpy as np

    from packer import PackOptions, pack

    data = Path(spec["data"])
    marker = data / "made.json"
    if marker.exists() and json.loads(marker.read_text()).get("version") == DATA_VERSION:
        return json.loads(marker.read_text())
    shutil.rmtree(data, ignore_errors=True)
    started, facts = time.perf_counter(), {}
    rng = np.random.default_rng(0)
    raw = data / "raw-jpeg"
    raw.mkdir(parents=True)
    for i in range(JPEGS):
        (raw / f"{i:05d}.jpg").write_bytes(_jpeg(i, rng))
        (raw / f"{i:05d}.cls").write_bytes(str(i % 10).encode())
    pack(raw, data / "jpeg", PackOptions(prefix="img", max_size=JPEG_SHARD_BYTES))
    shutil.rmtree(raw)
    sizes = _sample_bytes(data / "jpeg")
    facts["jpeg"] = {
        "samples": len(sizes),
        "shards": len(list((data / "jpeg").glob("*.tar"))),
        "mean_sample_bytes": sum(sizes) / len(sizes),
        "buffer_raw_bytes_mean": sum(sizes) / len(sizes) * 1000,
        "buffer_raw_bytes_max": sum(sorted(sizes)[-1000:]),
    }
    for name, (samples, per_shard) in TINY_SETS.items():
        raw = data / f"raw-{name}"
        raw.mkdir()
        for i in range(samples):
            (raw / f"{name}{i:06d}.txt").write_bytes(f"{name} {i}".encode())
            (raw / f"{name}{i:06d}.cls").write_bytes(str(i % 10).encode())
        pack(raw, data / name, PackOptions(prefix=name, max_size=None, max_count=per_shard))
        shutil.rmtree(raw)
        shards = sorted(str(p) for p in (data / name).glob("*.tar"))
        facts[name] = {"samples": samples, "shards": len(shards), "first_shard": shards[0]}
    facts.update(version=DATA_VERSION, seconds=time.perf_counter() - started)
    marker.write_text(json.dumps(facts, indent=1))
    return facts


def memory(spec: dict[str, Any]) -> dict[str, Any]:
    """Peak RSS over the constructed dataset's, first-sample time and samples/s over ``samples`` JPEGs."""
    import numpy  # noqa: F401  (everything decoding imports, loaded before the baseline)
    import PIL.Image  # noqa: F401
    import torch  # noqa: F401

    with contextlib.suppress(ImportError):
        import torchcodec.decoders  # noqa: F401
    from streamer import Mixture, ShardDataset

    options = {"buffer_size": spec["buffer"], "shuffle": True, "seed": 0}
    if spec["contender"] == "front":  # the buffer holds bytes, read front to back
        options["defer_reads"] = False
    if spec["contender"] in ("shard", "front"):  # shard: the default, whatever it is in that checkout
        dataset = ShardDataset(spec["index"], image="torch", **options)
    else:
        dataset = Mixture([{"path": spec["dir"], "weight": 1.0, "image": "torch"}], **options)
    baseline = peak_mb()
    started = time.perf_counter()
    stream = iter(dataset)
    first = next(stream)
    first_s = time.perf_counter() - started
    image = first.get("jpg")
    kind = f"{type(image).__name__}{tuple(getattr(image, 'shape', ()))}"
    del first, image
    count = 1 + sum(1 for _ in itertools.islice(stream, spec["samples"] - 1))
    seconds = time.perf_counter() - started
    return {
        "baseline_mb": baseline,
        "peak_mb": peak_mb(),
        "over_mb": peak_mb() - baseline,
        "first_ms": first_s * 1000,
        "samples": count,
        "seconds": seconds,
        "per_s": count / seconds,
        "jpg": kind,
    }


def speed(spec: dict[str, Any]) -> dict[str, Any]:
    """Full epochs of raw tiny samples: samples/s of each, from ``iter`` to the last sample."""
    import torch  # noqa: F401

    from streamer import Mixture, ShardDataset

    options = {"buffer_size": spec["buffer"], "shuffle": True, "seed": 0}
    if spec["contender"] == "front":
        options["defer_reads"] = False
    if spec["contender"] in ("shard", "front"):
        dataset = ShardDataset(spec["index"], decode=False, **options)
    else:
        dataset = Mixture([{"path": spec["dir"], "weight": 1.0, "decode": False}], **options)
    epochs = []  # the first (it pays for what loads on first use), then warm ones
    for epoch in range(spec.get("epochs", 1)):
        dataset.set_epoch(epoch)
        started = time.perf_counter()
        count = sum(1 for _ in dataset)
        epochs.append((count, time.perf_counter() - started))
    count, seconds = epochs[0]
    warm = min((s for _, s in epochs[1:]), default=seconds)
    return {
        "samples": count,
        "seconds": seconds,
        "per_s": count / seconds,
        "warm_per_s": count / warm,
        "epochs": epochs,
    }


def _count_opens(watch: str) -> collections.Counter[str]:
    """Count every open of ``watch`` (and of files beside it named after it) through open/io.open/os.open."""
    opened: collections.Counter[str] = collections.Counter()
    name = os.path.basename(watch)

    def note(path: Any) -> None:
        if isinstance(path, (str, bytes, os.PathLike)):
            base = os.path.basename(os.fsdecode(path))
            if base.startswith(name):
                opened["shard" if base == name else base[len(name) :].lstrip(".")] += 1

    def wrap(fn: Any) -> Any:
        def counted(file: Any, *args: Any, **kwargs: Any) -> Any:
            note(file)
            return fn(file, *args, **kwargs)

        return counted

    builtins.open = io.open = wrap(io.open)  # type: ignore[assignment]
    os.open = wrap(os.open)  # type: ignore[assignment]
    return opened


def small(spec: dict[str, Any]) -> dict[str, Any]:
    """One epoch of a Mixture of raw sources; how often the watched shard was opened."""
    import torch  # noqa: F401

    from streamer import Mixture

    opened = _count_opens(spec["watch"]) if spec.get("watch") else collections.Counter()
    sources = [{**source, "decode": False} for source in spec["sources"]]
    dataset = Mixture(sources, buffer_size=spec["buffer"], shuffle=True, seed=0, **spec.get("options", {}))
    before = dict(opened)
    started = time.perf_counter()
    per_source = collections.Counter(sample["__source__"] for sample in dataset)
    seconds = time.perf_counter() - started
    count = sum(per_source.values())
    return {
        "samples": count,
        "seconds": seconds,
        "per_s": count / seconds,
        "per_source": dict(per_source),
        "opens": dict(opened),
        "opens_before_iter": before,
        "length": len(dataset),
    }


if __name__ == "__main__":
    kind, given = sys.argv[1], json.loads(sys.argv[2])
    print(json.dumps({"make": make, "memory": memory, "speed": speed, "small": small}[kind](given)))
