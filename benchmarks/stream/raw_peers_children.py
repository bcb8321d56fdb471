"""Raw-peers benchmark, child side: what one run does in its fresh interpreter, one JSON line out.

``raw_peers_bench.py`` runs ``python raw_peers_children.py KIND SPEC_JSON`` with the interpreter of the
library measured: ours from the project's venv (with the snapshot of the sources first on PYTHONPATH),
LitData from ``/work/venvs/litdata``, MosaicML streaming from ``/work/venvs/mds``. This module imports only
the standard library at the top, so every one of those interpreters can run it; each child imports its
library (and torch) before its clock starts, and the clock includes the dataset's construction.

Kinds: ``write-ours`` / ``write-litdata`` / ``write-mds`` (the dataset in each format, from one folder of
``KEY.jpg`` + ``KEY.cls`` files), ``read`` (iterate a whole epoch, touching every image's bytes and every
label), ``bare`` (torchcodec over JPEG bytes already in memory), ``probe`` (what our ``ShardDataset``
offers), ``versions``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

BATCH = 64
SHARDS = 10  # each format is cut into about this many shards / chunks
JPEG_HEAD = 0xFF  # every JPEG starts with 0xFF 0xD8


def list_collate(batch: list[Any]) -> list[Any]:
    """A DataLoader collate that keeps the batch a list of samples (module level, so it pickles)."""
    return batch


def bytes_collate(batch: list[Any]) -> list[Any]:
    """A list collate that copies every memoryview member to ``bytes`` first, in the worker, so it pickles."""
    return [{k: bytes(v) if isinstance(v, memoryview) else v for k, v in s.items()} for s in batch]


# ---------------------------------------------------------------------------------------------------------
# The source folder: KEY.jpg + KEY.cls, sorted by key.
# ---------------------------------------------------------------------------------------------------------
def source_keys(src: str) -> list[str]:
    return sorted(name[: -len(".jpg")] for name in os.listdir(src) if name.endswith(".jpg"))


def read_record(src: str, key: str) -> dict[str, Any]:
    """One sample of the source folder: the JPEG's bytes and the int label."""
    base = os.path.join(src, key)
    with open(base + ".jpg", "rb") as handle:
        jpg = handle.read()
    with open(base + ".cls", "rb") as handle:
        label = int(handle.read())
    return {"jpg": jpg, "cls": label}


def _tree_facts(out: str) -> dict[str, Any]:
    files = [Path(dirpath, name) for dirpath, _dirs, names in os.walk(out) for name in names]
    return {"bytes": sum(path.stat().st_size for path in files), "files": len(files)}


def write_ours(spec: dict[str, Any]) -> dict[str, Any]:
    """Our packer, straight from the folder: KEY.jpg + KEY.cls become one sample's two members."""
    from packer import PackOptions, pack

    per_shard = math.ceil(spec["samples"] / SHARDS)
    started = time.perf_counter()
    pack(spec["src"], spec["out"], PackOptions(max_size=None, max_count=per_shard))
    seconds = time.perf_counter() - started
    shards = sorted(name for name in os.listdir(spec["out"]) if name.endswith(".tar"))
    return {"seconds": seconds, "shards": len(shards), **_tree_facts(spec["out"])}


def write_litdata(spec: dict[str, Any]) -> dict[str, Any]:
    """``litdata.optimize``: one worker, so the chunks are cut like ours (samples in key order, 10 chunks)."""
    import litdata

    keys = source_keys(spec["src"])
    started = time.perf_counter()
    litdata.optimize(
        fn=functools.partial(read_record, spec["src"]),
        inputs=keys,
        output_dir=spec["out"],
        chunk_size=math.ceil(len(keys) / SHARDS),
        num_workers=1,
        mode="overwrite",
        verbose=False,
    )
    seconds = time.perf_counter() - started
    chunks = [name for name in os.listdir(spec["out"]) if name.endswith(".bin")]
    return {"seconds": seconds, "shards": len(chunks), **_tree_facts(spec["out"])}


def write_mds(spec: dict[str, Any]) -> dict[str, Any]:
    """``streaming.MDSWriter`` with a bytes column and an int column; size_limit cuts about 10 shards."""
    from streaming import MDSWriter

    keys = source_keys(spec["src"])
    jpeg_bytes = sum(os.path.getsize(os.path.join(spec["src"], key + ".jpg")) for key in keys)
    per_sample = 4 + 8 + 4  # the sample's offset, the int column, the bytes column's size
    size_limit = math.ceil((jpeg_bytes + per_sample * len(keys)) / SHARDS * 1.002) + 4096
    started = time.perf_counter()
    with MDSWriter(out=spec["out"], columns={"jpg": "bytes", "cls": "int"}, size_limit=size_limit) as writer:
        for key in keys:
            writer.write(read_record(spec["src"], key))
    seconds = time.perf_counter() - started
    shards = [name for name in os.listdir(spec["out"]) if name.endswith(".mds")]
    return {"seconds": seconds, "shards": len(shards), "size_limit": size_limit, **_tree_facts(spec["out"])}


# ---------------------------------------------------------------------------------------------------------
# Reading: what each contender constructs and how it iterates.
# ---------------------------------------------------------------------------------------------------------
def import_before_clock(lib: str) -> None:
    """Everything the contender needs, imported before the clock starts."""
    import warnings

    import torch
    import torch.utils.data  # noqa: F401

    if lib == "ours":
        import importlib

        import streamer

        # What ShardDataset loads on construction, in the layout of the streamer on the path: --baseline may
        # name code from before it was split into folders (asked by folder, not by a failed import, which
        # an editable install of today's tree would answer with today's module).
        split = (Path(streamer.__file__).parent / "datasets").is_dir()
        for module in ("datasets.shard", "decode.sample") if split else ("dataset", "decode"):
            importlib.import_module(f"streamer.{module}")

        # The streamer decodes plain JPEGs to tensors with torchcodec when it is installed.
        with contextlib.suppress(ImportError, OSError, RuntimeError):
            import torchcodec.decoders  # noqa: F401
    elif lib == "litdata":
        import litdata  # noqa: F401
    elif lib == "mds":
        import streaming  # noqa: F401
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()  # a run killed for hanging leaves its shared memory behind
    warnings.simplefilter("ignore")  # MDS warns about batch_size and canonical nodes; not our business


def make_dataset(spec: dict[str, Any]) -> Any:
    lib, path = spec["lib"], spec["path"]
    if lib == "ours":
        from streamer import ShardDataset

        return ShardDataset(path, shuffle=True, **spec.get("options", {}))
    if lib == "litdata":
        from litdata import StreamingDataset

        return StreamingDataset(path, shuffle=True)
    if lib == "mds":
        from streaming import StreamingDataset

        # MDS refuses to shuffle without batch_size, even in one process: the DataLoader's batch size.
        return StreamingDataset(local=path, remote=None, shuffle=True, batch_size=BATCH)
    raise SystemExit(f"unknown library {lib!r}")


def make_loader(spec: dict[str, Any], ds: Any) -> Iterable[Any]:
    loader, workers = spec.get("loader", "torch"), spec["workers"]
    collate: Callable[..., Any] = list_collate
    if spec.get("collate") == "raw_collate":
        from streamer import raw_collate

        collate = raw_collate
    elif spec.get("collate") == "bytes":
        collate = bytes_collate
    elif spec.get("collate") == "stack":
        from streamer import collate as stack_collate

        collate = stack_collate
    kwargs = {"batch_size": BATCH, "num_workers": workers, "collate_fn": collate}
    if loader == "torch":
        from torch.utils.data import DataLoader

        return DataLoader(ds, **kwargs)
    if loader == "litdata":
        from litdata import StreamingDataLoader

        return StreamingDataLoader(ds, **kwargs)
    if loader == "mds":
        from streaming import StreamingDataLoader as MdsLoader

        return MdsLoader(ds, **kwargs)
    raise SystemExit(f"unknown loader {loader!r}")


class Tally:
    """What the consumer touched: counts and sums the parent checks against the source."""

    def __init__(self, copy: bool) -> None:
        self.copy = copy
        self.samples = 0
        self.image_bytes = 0
        self.jpeg_heads = 0  # images whose first byte is 0xFF
        self.label_sum = 0
        self.item_type: str | None = None
        self.label_type: str | None = None

    def raw(self, image: Any, label: Any) -> None:
        if self.item_type is None:
            self.item_type = describe_type(image)
            self.label_type = type(label).__name__
        if self.copy:
            image = bytes(image)
        self.samples += 1
        self.image_bytes += len(image)
        self.jpeg_heads += image[0] == JPEG_HEAD
        self.label_sum += int(label)

    def decoded(self, image: Any, label: Any) -> None:
        """A uint8 CHW tensor (or a stacked batch of them): its pixel count stands in for the bytes."""
        if self.item_type is None:
            self.item_type = describe_type(image)
            self.label_type = type(label).__name__
        self.samples += 1
        self.image_bytes += image.numel()
        self.jpeg_heads += image.shape[0] == 3
        self.label_sum += int(label)

    def facts(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "image_bytes": self.image_bytes,
            "jpeg_heads": self.jpeg_heads,
            "label_sum": self.label_sum,
            "item_type": self.item_type,
            "label_type": self.label_type,
        }


def describe_type(value: Any) -> str:
    name = type(value).__name__
    if isinstance(value, memoryview):
        return f"memoryview ({'read-only' if value.readonly else 'writable'})"
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        return f"{name} {value.dtype} {tuple(value.shape)}"
    return name


def touch_raw_batch(batch: Any, tally: Tally) -> str:
    """Touch every member of a batch: a list of sample dicts, or whatever ``raw_collate`` returns.

    For a ``raw_collate`` batch the ways tried, in order: column access (``batch["jpg"]``, a sequence of
    members), iteration yielding sample mappings. Returns how it was touched, for the report.
    """
    if isinstance(batch, list) and (not batch or isinstance(batch[0], Mapping)):
        for sample in batch:
            tally.raw(sample["jpg"], sample["cls"])
        return "list of sample dicts"
    try:
        images, labels = batch["jpg"], batch["cls"]
    except (KeyError, TypeError, IndexError):
        images = labels = None
    if images is not None and labels is not None:
        for image, label in zip(images, labels, strict=True):
            tally.raw(image, label)
        return f"{type(batch).__name__}: columns batch['jpg'], batch['cls']"
    for sample in batch:
        tally.raw(sample["jpg"], sample["cls"])
    return f"{type(batch).__name__}: iterated as samples"


def iterate(spec: dict[str, Any], tally: Tally, started: float) -> tuple[float | None, str]:
    """One epoch; returns (seconds to the first sample or batch, how batches were touched)."""
    ds = make_dataset(spec)
    decoded = spec.get("decoded", False)
    first: float | None = None
    how = "samples in process"
    if not spec.get("workers"):
        for sample in ds:
            if first is None:
                first = time.perf_counter() - started
            if decoded:
                tally.decoded(sample["jpg"], sample["cls"])
            else:
                tally.raw(sample["jpg"], sample["cls"])
        return first, how
    for batch in make_loader(spec, ds):
        now = time.perf_counter()
        touched = touch_decoded_batch(batch, tally) if decoded else touch_raw_batch(batch, tally)
        if first is None:
            first = now - started
            how = touched  # the first batch's shape, not the last one's (a short one)
    return first, how


def touch_decoded_batch(batch: Any, tally: Tally) -> str:
    if isinstance(batch, list):
        for sample in batch:
            tally.decoded(sample["jpg"], sample["cls"])
        return "list of sample dicts"
    images, labels = batch["jpg"], batch["cls"]
    for image, label in zip(images, labels, strict=True):  # a stacked tensor iterates over its first dim
        tally.decoded(image, label)
    return f"stacked: jpg {describe_type(images)}"


def child_read(spec: dict[str, Any]) -> dict[str, Any]:
    import faulthandler

    # A run that hangs is killed by the parent; the stacks dumped a little before say where it waited.
    if spec.get("dump_after"):
        faulthandler.dump_traceback_later(spec["dump_after"], exit=False)
    import_before_clock(spec["lib"])
    tally = Tally(copy=spec.get("copy", False))
    started = time.perf_counter()
    first, how = iterate(spec, tally, started)
    seconds = time.perf_counter() - started
    faulthandler.cancel_dump_traceback_later()
    return {"seconds": seconds, "first_seconds": first, "touched": how, **tally.facts()}


def jpeg_members(index: str) -> list[tuple[bytes, bytes]]:
    """Every (jpg, cls) member pair of our shards, read before the clock with the format's own reader."""
    from shardstream.format import DatasetIndex
    from shardstream.format.tarread import iter_samples

    index_path = Path(index)
    loaded = DatasetIndex.load(index_path)
    out = []
    for entry in loaded.shards:
        path = index_path.parent / entry.name
        with open(path, "rb") as handle:
            out += [(bytes(s["jpg"]), bytes(s["cls"])) for s in iter_samples(handle, url=str(path))]
    return out


def child_bare(spec: dict[str, Any]) -> dict[str, Any]:
    """The floor for decoding: torchcodec's ``decode_jpeg`` (what the streamer calls) over bytes in memory;
    with ``workers``, the same in DataLoader workers (each decodes its share of the bytes, which it
    inherited by fork), batches stacked by ``streamer.batch.collate`` as ours are."""
    import torch
    from torchcodec.decoders import decode_jpeg

    members = jpeg_members(spec["index"])
    tally = Tally(copy=False)
    workers = spec.get("workers")
    if workers:
        from streamer import collate

        class BareDecode(torch.utils.data.IterableDataset):  # fork: inherited, never pickled
            def __iter__(self) -> Iterator[dict[str, Any]]:
                info = torch.utils.data.get_worker_info()
                for jpg, cls in members[info.id :: info.num_workers]:
                    yield {"jpg": decode_jpeg(jpg, mode="RGB"), "cls": int(cls)}

        started = time.perf_counter()
        first = None
        loader = torch.utils.data.DataLoader(
            BareDecode(),
            batch_size=BATCH,
            num_workers=workers,
            collate_fn=collate,
            multiprocessing_context="fork",
        )
        touched = ""
        for batch in loader:
            how = touch_decoded_batch(batch, tally)
            if first is None:
                first = time.perf_counter() - started
                touched = how  # the first batch's shape, not the last one's (a short one)
        seconds = time.perf_counter() - started
        return {"seconds": seconds, "first_seconds": first, "touched": touched, **tally.facts()}
    started = time.perf_counter()
    first = None
    for jpg, cls in members:
        tally.decoded(decode_jpeg(jpg, mode="RGB"), int(cls))
        if first is None:
            first = time.perf_counter() - started
    seconds = time.perf_counter() - started
    touched = "decode_jpeg(bytes) in a loop"
    return {"seconds": seconds, "first_seconds": first, "touched": touched, **tally.facts()}


def child_probe(spec: dict[str, Any]) -> dict[str, Any]:
    """What the ShardDataset measured offers: zero_copy, and ``streamer.raw_collate`` with its docstring."""
    import streamer
    from streamer import ShardDataset

    params = inspect.signature(ShardDataset).parameters
    try:
        raw_collate = streamer.raw_collate
    except AttributeError:
        raw_collate = None
    return {
        "zero_copy": "zero_copy" in params,
        "raw_collate": raw_collate is not None,
        "raw_collate_doc": inspect.getdoc(raw_collate) if raw_collate is not None else None,
        "streamer_file": streamer.__file__,
    }


def child_versions(spec: dict[str, Any]) -> dict[str, Any]:
    import importlib.metadata
    import platform

    out = {"python": platform.python_version()}
    for name in spec["names"]:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


CHILDREN: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "write-ours": write_ours,
    "write-litdata": write_litdata,
    "write-mds": write_mds,
    "read": child_read,
    "bare": child_bare,
    "probe": child_probe,
    "versions": child_versions,
}


def imported_from() -> dict[str, str | None]:
    """Where this child imported our packages from (the parent checks it is the snapshot)."""
    names = ("shardstream", "packer", "streamer")
    return {name: getattr(sys.modules[name], "__file__", None) for name in names if name in sys.modules}


def peak_rss() -> int:
    """Peak RSS of this process so far (VmHWM), in bytes; DataLoader workers are not included."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def main(argv: list[str]) -> int:
    kind, spec = argv[1], json.loads(argv[2])
    if kind not in CHILDREN:
        raise SystemExit(f"unknown child {kind!r}")
    result = CHILDREN[kind](spec)
    result["source_files"] = imported_from()
    result["vmhwm"] = peak_rss()
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
