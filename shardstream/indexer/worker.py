"""One shard's scan, as a pool worker runs it: headers walked, offsets sidecar and sorted key run written.

A task returns a small journal record; the bulky results (offsets, keys) go straight to files, so
nothing per sample crosses between processes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import ShardNotFoundError, ShardReadError
from ..format.costfield import RECORD_MEMBER, BadCost, record_cost
from ..format.keyfile import key_line
from ..format.offsets import encode_offsets, offsets_name
from ..format.samplecols import COST, encode_sample_columns, sample_columns_name
from ..format.scan import ShardScan, scan_file, scan_shard
from ..format.sidecars import offsets_sidecar, sample_columns_sidecar
from ..format.tails import column_tail
from ..io.publish import write_atomic
from ..io.urls import is_remote

RemoteOpener = Callable[[str], BinaryIO]


@dataclass(frozen=True)
class ScanSettings:
    checksum: bool
    partial: bool
    runs: str  # folder of the per-shard sorted key runs
    sidecars: str | None  # folder of offsets sidecars under derived names; None: beside each shard
    open_remote: RemoteOpener | None = None
    cost: str | None = None  # a field of each sample's .json record: its cost, into the shard's .cols


BAD_COSTS_SHOWN = 20  # a shard's bad-cost samples named in its journal line (all of them counted)


def sidecar_path(settings: ScanSettings, url: str, name: str) -> str:
    if settings.sidecars is None:
        return offsets_name(url)
    return os.path.join(settings.sidecars, offsets_sidecar(name))


def columns_path(settings: ScanSettings, url: str, name: str) -> str:
    """The shard's .cols: beside the shard, or beside its offsets sidecar in the sidecars folder."""
    if settings.sidecars is None:
        return sample_columns_name(url)
    return os.path.join(settings.sidecars, sample_columns_sidecar(name))


def run_path(runs: str, shard: int) -> str:
    return os.path.join(runs, f"{shard:09d}.keys")


def scan_batch(tasks: list[tuple[int, str, str]], settings: ScanSettings) -> list[dict[str, Any]]:
    return [scan_one(shard, url, name, settings) for shard, url, name in tasks]


def scan_one(shard: int, url: str, name: str, settings: ScanSettings) -> dict[str, Any]:
    stat = None
    if is_remote(url):
        scan, missing = _scan_remote(url, settings)
        if missing:
            return _record(shard, url, scan, None, 0, missing=True)
    else:
        try:
            info = os.stat(url)
            stat = [info.st_size, info.st_mtime_ns]
        except FileNotFoundError:
            gone = ShardScan(damage="missing: no such file", damage_offset=None)
            return _record(shard, url, gone, None, 0, missing=True)
        except OSError as exc:
            scan = ShardScan(damage=f"cannot stat: {exc.strerror or exc}", damage_offset=None)
            return _record(shard, url, scan, None, 0)
        scan = scan_file(url, checksum=settings.checksum, member=_member(settings))
    keep = scan.samples > 0 and (scan.damage is None or settings.partial)
    unkeyed = 0
    if keep:
        _publish(sidecar_path(settings, url, name), encode_offsets(scan.offsets))
        lines = [key_line(key, shard, i) for i, key in enumerate(scan.keys)]
        good = sorted(line for line in lines if line is not None)
        unkeyed = len(lines) - len(good)
        _publish(run_path(settings.runs, shard), b"".join(good))
    record = _record(shard, url, scan, stat, unkeyed)
    if keep and settings.cost is not None:
        record.update(_costs(scan, settings.cost, columns_path(settings, url, name)))
    return record


def _member(settings: ScanSettings) -> str | None:
    return RECORD_MEMBER if settings.cost is not None else None


def _costs(scan: ShardScan, field: str, path: str) -> dict[str, Any]:
    """The shard's costs published as its .cols (their sum journaled), or, when any sample has no valid
    cost, no .cols at all and the bad samples counted (the first few named with their byte offset)."""
    costs, bad = [], []
    for i, data in enumerate(scan.members or []):
        try:
            costs.append(record_cost(data, field))
        except BadCost as exc:
            bad.append({"key": scan.keys[i], "offset": scan.offsets[i], "reason": str(exc)})
    if bad:
        Path(path).unlink(missing_ok=True)  # an earlier run's columns for this shard no longer hold
        return {"bad_costs": len(bad), "bad_cost_samples": bad[:BAD_COSTS_SHOWN]}
    _publish(path, encode_sample_columns({COST: costs}, {COST: "u8"}))
    return {"cost_sum": sum(costs), "cost_tail": column_tail(costs)}


def _scan_remote(url: str, settings: ScanSettings) -> tuple[ShardScan, bool]:
    """The scan, and whether the object is not there at all (404, no such key)."""
    if settings.open_remote is None:  # urllib3 and fsspec load only when a shard is remote
        from ..io.openers import open_stream as open_remote
    else:
        open_remote = settings.open_remote
    try:
        stream = open_remote(url)
    except ShardReadError as exc:
        return ShardScan(damage=exc.message, damage_offset=exc.offset), isinstance(exc, ShardNotFoundError)
    with stream:
        scan = scan_shard(stream, url=url, checksum=settings.checksum, member=_member(settings))
        return scan, False


def _record(
    shard: int, url: str, scan: ShardScan, stat: list[int] | None, unkeyed: int, *, missing: bool = False
) -> dict[str, Any]:
    return {
        "shard": shard,
        "url": url,
        "samples": scan.samples,
        "bytes": scan.size,
        "sha256": scan.sha256,
        "fields": scan.fields,
        "damage": scan.damage,
        "offset": scan.damage_offset,
        "missing": missing,
        "unkeyed": unkeyed,
        "stat": stat,
    }


def _publish(path: str, data: bytes) -> None:
    """A reader never sees half a sidecar. No fsync per file: a kill -9 loses nothing the OS has; the
    journal line that vouches for it is written after the rename."""
    write_atomic(Path(path), data, durable=False, unique=True)
