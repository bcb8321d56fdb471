"""Object-store peers benchmark, child side: one contender's run in its own interpreter, one JSON line out.

``peers_bench.py`` runs ``python peers_children.py KIND SPEC_JSON`` with the contender's interpreter: ours,
webdataset and obstore from the project's venv, LitData from ``/work/venvs/litdata``, s3torchconnector from
``/work/venvs/s3tc``. Only the standard library is imported at the top, so every one of them can run it;
each child imports its library (and torch) before its clock starts, and the clock includes the dataset's
construction. The endpoint and dummy credentials come from the environment the parent sets
(``AWS_ENDPOINT_URL_S3``, ``AWS_ACCESS_KEY_ID``, ...), as a user's job would have them.

Kinds: ``ours`` (``streamer.ShardDataset("s3://.../shardstream-index.json", decode=False, shuffle=False)``;
``$SHARDSTREAM_S3_CLIENT`` as the parent set it), ``wds`` (``webdataset.WebDataset`` over ``pipe:aws s3 cp
... -`` URLs), ``litdata`` (``litdata.StreamingDataset("s3://...")``, a fresh cache folder per run),
``s3tc`` (``s3torchconnector.S3IterableDataset`` over the tar shards, each read through ``tarfile`` in
stream mode), ``obstore`` (``ceiling_bench.measure``: ranged GETs alone, no tar), ``write-litdata``,
``versions``. ``loader: true`` reads through ``torch.utils.data.DataLoader(batch_size=None,
num_workers=2)`` (fork, torch's default on Linux) with a collate that copies memoryviews to bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

WORKERS = 2


def as_bytes(sample: Any) -> Any:
    """The loaders' collate (module level, so it pickles): memoryviews (LitData's) become bytes."""
    if isinstance(sample, dict):
        return {k: bytes(v) if isinstance(v, memoryview) else v for k, v in sample.items()}
    return sample


def through_loader(dataset: Any, loader: bool) -> Iterable[Any]:
    if not loader:
        return dataset
    from torch.utils.data import DataLoader

    return DataLoader(dataset, batch_size=None, num_workers=WORKERS, collate_fn=as_bytes)


def payload(sample: Any) -> int:
    """The sample's raw bytes: its ``bin`` member (the packer's ``.json`` of each sample is not counted)."""
    return len(sample["bin"]) if isinstance(sample, dict) else len(sample)


def timed(make: Any, loader: bool) -> dict[str, Any]:
    """Construct (``make()``) and iterate the whole epoch: seconds, first-sample time, bytes, samples."""
    t_start = time.time()
    began, cpu = time.perf_counter(), time.process_time()
    first = None
    nbytes = samples = 0
    for sample in through_loader(make(), loader):
        if first is None:
            first = time.perf_counter() - began
            t_first = time.time()
        nbytes += payload(sample)
        samples += 1
    seconds = time.perf_counter() - began
    return {
        "seconds": seconds,
        "cpu_s": time.process_time() - cpu,  # this process only (not DataLoader workers)
        "first_s": first,
        "t_start": t_start,
        "t_first": t_first if first is not None else None,
        "bytes": nbytes,
        "samples": samples,
        "mb_s": nbytes / 1e6 / seconds,
    }


def read_ours(spec: dict[str, Any]) -> dict[str, Any]:
    from shardstream.io.objstoreoptions import ObjectStoreOptions
    from streamer import ShardDataset

    # $PEERS_OURS_OPTIONS: ObjectStoreOptions fields as JSON ({"part_size": "32MiB"}), to try other settings
    options = ObjectStoreOptions(**json.loads(os.environ.get("PEERS_OURS_OPTIONS") or "{}"))
    return timed(
        lambda: ShardDataset(spec["url"], decode=False, shuffle=False, object_store=options), spec["loader"]
    )


def read_wds(spec: dict[str, Any]) -> dict[str, Any]:
    import webdataset as wds

    def make() -> Any:
        return wds.WebDataset(spec["urls"], shardshuffle=False, empty_check=False)

    return timed(make, spec["loader"])


def read_litdata(spec: dict[str, Any]) -> dict[str, Any]:
    """``no_obstore``: LitData's chunk GETs through boto3, as when obstore is not installed (its obstore
    store is built without ``allow_http``, so an ``http://`` endpoint fails with BadScheme)."""
    from litdata import StreamingDataset
    from litdata.streaming import downloader

    if spec.get("no_obstore"):
        downloader._OBSTORE_AVAILABLE = False

    shutil.rmtree(spec["cache_dir"], ignore_errors=True)  # a fresh cache: every chunk from the store
    os.makedirs(spec["cache_dir"])
    options = {
        "endpoint_url": os.environ["AWS_ENDPOINT_URL_S3"],
        "aws_access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"],
    }

    def make() -> Any:
        return StreamingDataset(
            spec["url"], cache_dir=spec["cache_dir"], storage_options=options, shuffle=False
        )

    try:
        return timed(make, spec["loader"])
    finally:
        shutil.rmtree(spec["cache_dir"], ignore_errors=True)


def tar_samples(objects: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """Each object (a file-like S3Reader) read as a tar stream: one dict per member, as webdataset would."""
    import tarfile

    for reader in objects:
        with tarfile.open(fileobj=reader, mode="r|") as tar:
            for member in tar:
                if member.isfile() and member.name.endswith(".bin"):
                    yield {"__key__": member.name, "bin": tar.extractfile(member).read()}


class TarOverS3:
    """s3torchconnector's iterable dataset of objects, each turned into its tar members (torch-iterable)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        from s3torchconnector import S3ClientConfig, S3IterableDataset

        config = S3ClientConfig(force_path_style=True)
        self.objects = S3IterableDataset.from_objects(
            spec["uris"],
            region="us-east-1",
            endpoint=os.environ["AWS_ENDPOINT_URL_S3"],
            s3client_config=config,
            enable_sharding=spec["loader"],  # else every DataLoader worker reads every object
        )

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return tar_samples(self.objects)


def read_s3tc(spec: dict[str, Any]) -> dict[str, Any]:
    import torch.utils.data

    class Dataset(TarOverS3, torch.utils.data.IterableDataset):
        pass

    return timed(lambda: Dataset(spec), spec["loader"])


def read_obstore(spec: dict[str, Any]) -> dict[str, Any]:
    """The bytes alone, as ``ceiling_bench`` reads them (``measure`` reused): ``inflight`` 8 MiB ranges."""
    sys.path.insert(0, spec["bench_dir"])
    sys.path.insert(0, os.path.dirname(spec["bench_dir"]))  # benchmarks/: its harness package
    from ceiling_bench import measure

    t_start = time.time()
    got = measure(os.environ["AWS_ENDPOINT_URL_S3"], spec["keys"], spec["size"], [spec["inflight"]], 1)
    best = got[spec["inflight"]]
    return {
        "seconds": best["seconds"],
        "first_s": best["first_byte_s"],
        "t_start": t_start,
        "t_first": t_start + best["first_byte_s"],  # about: the store is made after t_start
        "bytes": best["bytes"],
        "samples": None,
        "mb_s": best["mb_s"],
    }


def write_litdata(spec: dict[str, Any]) -> dict[str, Any]:
    """``litdata.optimize`` over the same samples (``{"bin": bytes}``), one worker, one chunk per shard."""
    import functools

    import litdata

    sys.path.insert(0, spec["bench_dir"])
    from peers_data import litdata_sample  # module level: optimize pickles fn into its worker

    started = time.perf_counter()
    litdata.optimize(
        fn=functools.partial(litdata_sample, size=spec["sample_size"]),
        inputs=list(range(spec["samples"])),
        output_dir=spec["out"],
        chunk_bytes=spec["chunk_bytes"],
        num_workers=1,
    )
    return {"seconds": time.perf_counter() - started}


def versions(spec: dict[str, Any]) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in spec["names"]:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


LIBRARY = {"ours": "streamer", "wds": "webdataset", "litdata": "litdata", "s3tc": "s3torchconnector"}
KINDS = {
    "ours": read_ours,
    "wds": read_wds,
    "litdata": read_litdata,
    "s3tc": read_s3tc,
    "obstore": read_obstore,
    "write-litdata": write_litdata,
    "versions": versions,
}


def main() -> None:
    kind, spec = sys.argv[1], json.loads(sys.argv[2])
    if kind in ("ours", "wds", "litdata", "s3tc"):  # imported before the clock starts
        import torch  # noqa: F401

        __import__(LIBRARY[kind])
    print(json.dumps(KINDS[kind](spec)), flush=True)


if __name__ == "__main__":
    main()
