"""Streamer benchmark, child side: what one contender runs in its fresh interpreter (one JSON line out).

``stream_bench.py --child KIND --spec JSON`` lands in ``run_child``. Timed children import everything first
(``import_everything``: torch, webdataset, Pillow, the streamer, torchcodec) and start their clock after,
with dataset construction inside the timing. Each child reports its own peak RSS (``VmHWM``) just before it
exits, and where it imported the project from, which the parent checks.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from harness import DATASET_MODULE, DECODE_MODULE, project
from harness.sources import imported_sources

BUFFER = 1000  # shuffle buffer, ours and webdataset's alike
BATCH = 32  # DataLoader batch size
LOADER_WORKERS = 2


def rss_now() -> int:
    """Resident set size of this process now, in bytes (from /proc/self/statm)."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def rss_peak() -> int:
    """Peak RSS of this process so far (VmHWM), in bytes."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def list_collate(batch: list[Any]) -> list[Any]:
    """DataLoader collate that keeps the batch a list: no stacking cost for either contender."""
    return batch


def import_everything() -> None:
    """Everything a contender needs, imported before the clock starts."""
    import io  # noqa: F401
    import warnings

    import numpy  # noqa: F401
    import torch
    import torch.utils.data  # noqa: F401
    import webdataset  # noqa: F401
    from PIL import Image  # noqa: F401

    importlib.import_module(DATASET_MODULE)
    importlib.import_module(DECODE_MODULE)

    # The streamer decodes plain JPEGs to tensors with torchcodec when it is installed.
    with contextlib.suppress(ImportError, OSError, RuntimeError):
        import torchcodec.decoders  # noqa: F401

    # webdataset warns about shardshuffle=False; torch about read-only arrays in the bare-Pillow loop.
    warnings.simplefilter("ignore")


def make_source(spec: dict[str, Any]) -> Iterable[Any]:
    kind = spec["kind"]
    if kind == "ours":
        options = dict(spec.get("options", {}))
        return project("ShardDataset")(spec["index"], buffer_size=BUFFER, **options)  # type: ignore[no-any-return]
    if kind == "wds":
        import webdataset as wds

        ds = wds.WebDataset(spec["pattern"], shardshuffle=False, empty_check=False).shuffle(BUFFER)
        decode = spec.get("decode")
        if decode == "default":
            ds = ds.decode()
        elif decode:
            ds = ds.decode(decode)
        return ds
    raise SystemExit(f"unknown contender kind {kind!r}")


def count_samples(spec: dict[str, Any]) -> int:
    source = make_source(spec)
    workers = spec.get("workers", 0)
    if not workers:
        n = 0
        for _ in source:
            n += 1
        return n
    from torch.utils.data import DataLoader, default_collate

    stack = spec.get("collate") == "default"
    collate = default_collate if stack else list_collate
    loader = DataLoader(source, batch_size=BATCH, collate_fn=collate, num_workers=workers)  # type: ignore[arg-type]
    n = 0
    for batch in loader:
        n += len(batch["__key__"]) if stack else len(batch)
    return n


def child_count(spec: dict[str, Any]) -> dict[str, Any]:
    """Time ``count_samples``; with ``spec["profile"]``, cProfile the same loop (top N rows by tottime)."""
    profiler = None
    if spec.get("profile"):
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    started = time.perf_counter()
    n = count_samples(spec)
    result: dict[str, Any] = {"seconds": time.perf_counter() - started, "samples": n}
    if profiler is not None:
        import io
        import pstats

        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).strip_dirs().sort_stats("tottime").print_stats(
            int(spec["profile"])
        )
        result["profile"] = text.getvalue()
    return result


def jpeg_bytes(shards: list[str]) -> list[bytes]:
    iter_samples = project("iter_samples")
    out = []
    for path in shards:
        with open(path, "rb") as handle:
            out += [sample["jpg"] for sample in iter_samples(handle, url=path) if "jpg" in sample]
    return out


def child_pillow(spec: dict[str, Any]) -> dict[str, Any]:
    """The ceiling: Pillow decoding to a uint8 CHW tensor, over JPEG bytes already in memory."""
    import io

    import numpy as np
    import torch
    from PIL import Image

    data = jpeg_bytes(spec["shards"])
    draft = spec.get("draft")
    started = time.perf_counter()
    n = 0
    if draft is None:
        for b in data:
            torch.from_numpy(np.asarray(Image.open(io.BytesIO(b)).convert("RGB"))).permute(2, 0, 1)
            n += 1
    else:
        for b in data:
            image = Image.open(io.BytesIO(b))
            image.draft("RGB", (draft, draft))
            torch.from_numpy(np.asarray(image.convert("RGB"))).permute(2, 0, 1)
            n += 1
    return {"seconds": time.perf_counter() - started, "samples": n}


def child_import_cost() -> dict[str, Any]:
    """Seconds and RSS that importing torchcodec's decoders adds to a process that has torch already."""
    import torch  # noqa: F401

    before, started = rss_now(), time.perf_counter()
    try:
        import torchcodec.decoders  # noqa: F401
    except (ImportError, OSError, RuntimeError) as exc:
        return {"error": str(exc)}
    return {"seconds": time.perf_counter() - started, "rss_added": rss_now() - before}


def child_agree(spec: dict[str, Any]) -> dict[str, Any]:
    """Do ours and bare Pillow give the same pixels? (Ours may decode with another library.)"""
    import io

    import numpy as np
    import torch
    from PIL import Image

    decoder = project("SampleDecoder")(image="torch")
    data = jpeg_bytes(spec["shards"][:1])[: spec["count"]]
    same = 0
    worst = 0
    for b in data:
        ours = decoder({"__key__": "k", "jpg": b})["jpg"]
        pillow = torch.from_numpy(np.asarray(Image.open(io.BytesIO(b)).convert("RGB"))).permute(2, 0, 1)
        if ours.shape == pillow.shape and ours.dtype == pillow.dtype:
            diff = int((ours.int() - pillow.int()).abs().max())
            same += diff == 0
            worst = max(worst, diff)
        else:
            worst = 256
    return {"images": len(data), "identical": same, "max_abs_diff": worst}


def child_one_sample(spec: dict[str, Any]) -> dict[str, Any]:
    """Construct a ShardDataset on a pattern, take one sample; RSS at each step. Imports only its reader."""
    source = spec["pattern"]
    if spec.get("wds"):
        import webdataset as wds

        after_import = rss_now()
        ds: Any = wds.WebDataset(source, shardshuffle=False, empty_check=False).shuffle(BUFFER)
    else:
        importlib.import_module(DECODE_MODULE)  # ShardDataset imports it on construction
        shard_dataset = project("ShardDataset")

        after_import = rss_now()
        ds = shard_dataset(source, shuffle=spec["shuffle"], buffer_size=BUFFER)
    after_construct = rss_now()
    sample = next(iter(ds))
    return {
        "rss_after_import": after_import,
        "rss_after_construct": after_construct,
        "rss_after_first": rss_now(),
        "vmhwm": rss_peak(),
        "first_url": sample["__url__"],
        "first_key": sample["__key__"],
    }


def child_flat(spec: dict[str, Any]) -> dict[str, Any]:
    """RSS every ``every`` samples through one epoch of ShardDataset on the index."""
    every = spec["every"]
    ds = project("ShardDataset")(spec["index"], buffer_size=BUFFER, decode=spec["decode"])
    checkpoints = []
    started = time.perf_counter()
    n = 0
    first = None
    for _ in ds:
        n += 1
        if first is None:
            first = rss_now()
        if n % every == 0:
            checkpoints.append([n, rss_now()])
    return {
        "seconds": time.perf_counter() - started,
        "samples": n,
        "rss_first_sample": first,
        "checkpoints": checkpoints,
        "vmhwm": rss_peak(),
    }


CHILDREN: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "count": child_count,
    "pillow": child_pillow,
    "agree": child_agree,
    "one": child_one_sample,
    "flat": child_flat,
}


def run_child(kind: str, spec_json: str) -> int:
    """Run the child ``kind`` on its spec; print its result as one JSON line."""
    spec = json.loads(spec_json)
    if kind == "importcost":
        print(json.dumps(child_import_cost()))
        return 0
    if kind not in CHILDREN:
        raise SystemExit(f"unknown child {kind!r}")
    if kind != "one":
        import_everything()
    result = CHILDREN[kind](spec)
    result["source_files"] = imported_sources()
    # The peak before interpreter shutdown: wait4/`time` report ~130 MB more for any process that imported
    # torch, faulted in by libtorch's exit-time destructors, which says nothing about the work measured.
    result["vmhwm"] = rss_peak()
    print(json.dumps(result))
    return 0
