"""One shard's columns: its raw samples read in order, the user's function called on each, the values
merged into the shard's .cols (other columns kept) and published atomically; the whole shard's values
are held at once (8 bytes a sample and column)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FormatError
from ..format.samplecols import (
    COST,
    check_column_name,
    column_sum,
    decode_sample_columns,
    encode_sample_columns,
)
from ..format.tails import column_tail
from ..format.tarread import iter_samples
from ..io.localfiles import open_regular
from ..io.publish import write_atomic

SampleFn = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True)
class ShardTask:
    """What a worker (a pool process or a Ray task) needs for one shard, all picklable."""

    shard: int  # its place in the index
    path: str  # the tar
    cols: str  # its .cols sidecar
    samples: int  # as the index counts them
    fn: str  # module:function
    name: str  # the column an int result goes to


def dtype_of(name: str) -> str:
    """A column's dtype, the same in every shard: ``cost`` u8 (as ``pack --cost`` writes it), other
    integer columns i8."""
    return "u8" if name == COST else "i8"


def load_function(spec: str) -> SampleFn:
    """``module:function`` imported (a ValueError naming ``fn`` when it cannot be)."""
    module_name, colon, attr = spec.partition(":")
    if not colon or not module_name or not attr:
        raise ValueError(f"fn {spec!r}: give module:function, e.g. mypkg.costs:tokens")
    try:
        found: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"fn {spec!r} cannot be loaded ({exc}); is its module on PYTHONPATH?") from exc
    if not callable(found):
        raise ValueError(f"fn {spec!r} is a {type(found).__name__}, not a function")
    return found


def column_batch(tasks: list[ShardTask]) -> list[dict[str, Any]]:
    """``column_shard`` for each task (the pool's unit of work); the function is loaded once a batch."""
    return [column_shard(task) for task in tasks]


def column_shard(task: ShardTask, fn: SampleFn | None = None) -> dict[str, Any]:
    """Compute, merge, publish; the journal record: ``{"shard", "dtypes", "sums", "tails"}`` (a tail for
    each column with no negative value: the index keeps tails of non-negative columns only)."""
    fn = fn if fn is not None else load_function(task.fn)
    values: dict[str, list[int]] = {}
    count = 0
    with open_regular(task.path, buffering=0) as handle:
        for sample in iter_samples(handle, url=task.path):
            _collect(values, fn(sample), task, sample["__key__"], count)
            count += 1
    if count != task.samples:
        raise FormatError(
            f"{task.path}: {count} samples, the index says {task.samples}: the shard changed since it "
            "was indexed; index it again (shardstream index) before computing columns"
        )
    merged = dict(_existing(task))
    merged.update(values)
    dtypes = {name: dtype_of(name) if name in values else str(a.dtype.str[1:]) for name, a in merged.items()}
    try:
        data = encode_sample_columns(merged, dtypes)
    except ValueError as exc:
        raise ValueError(f"fn {task.fn!r} on {task.path}: {exc}") from None
    write_atomic(Path(task.cols), data, durable=False, unique=True)  # the journal line vouches for it
    sums = {name: column_sum(np.asarray(v, dtype=dtype_of(name))) for name, v in values.items()}
    tails = {name: column_tail(v) for name, v in values.items() if not v or min(v) >= 0}
    dtypes = {n: dtype_of(n) for n in values}
    return {"shard": task.shard, "samples": count, "dtypes": dtypes, "sums": sums, "tails": tails}


def _collect(values: dict[str, list[int]], result: Any, task: ShardTask, key: str, i: int) -> None:
    """One sample's result into its columns: an int goes to ``task.name``, a dict to its names; every
    sample must give the same names (a column has a value for every sample)."""
    found = {task.name: result} if not isinstance(result, Mapping) else dict(result)
    if i == 0:
        for name in found:
            check_column_name(name, source=f"fn {task.fn!r}")
            values[name] = []
    if found.keys() != values.keys():
        raise ValueError(
            f"fn {task.fn!r} on {task.path}, sample {key!r}: gave columns {sorted(found)}, the first "
            f"sample {sorted(values)}; every sample needs the same ones"
        )
    for name, value in found.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(
                f"fn {task.fn!r} on {task.path}, sample {key!r}: column {name!r} got "
                f"{type(value).__name__} {value!r:.40}, not an int"
            )
        values[name].append(int(value))


def _existing(task: ShardTask) -> dict[str, np.ndarray]:
    """The shard's columns already there (none: no .cols yet); damage is refused, never overwritten."""
    try:
        with open(task.cols, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return {}
    try:
        return decode_sample_columns(data, source=task.cols, samples=task.samples)
    except FormatError as exc:
        name = os.path.basename(task.cols)
        raise FormatError(f"{exc}; delete {name} to compute its columns afresh") from exc
