"""Per-sample columns of one shard (a cost, later a score): one typed array each, read without a copy; not
greppable, and a whole shard's worth at a time (never one sample)."""

# Layout, little-endian throughout:
#   header      24 bytes: magic b"SSSAMPLE", uint32 layout version, uint32 column count c, uint64 samples n
#   descriptors c x 32 bytes: name (ASCII [a-z0-9_], 1-24 bytes, NUL-padded), dtype code (8 bytes,
#               NUL-padded: u1 u2 u4 u8 i1 i2 i4 i8 f4 f8)
#   values      per column, in descriptor order: n values of its dtype, each array starting on an 8-byte
#               boundary (zero padding before it)
# The file's length is exactly what the header implies: a file shorter or longer is damage. Unknown names
# are kept (later columns: quality, language, seconds), unknown dtypes are refused.

from __future__ import annotations

import re
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import FormatError
from .constants import SAMPLE_COLUMNS_MAGIC, SAMPLE_COLUMNS_SUFFIX

LAYOUT_VERSION = 1
HEADER = struct.Struct("<8sIIQ")
DESCRIPTOR = struct.Struct("<24s8s")
DTYPES = ("u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8", "f4", "f8")
INTEGER_DTYPES = frozenset(d for d in DTYPES if d[0] in "ui")
COST = "cost"  # the column a budget planner reads: a non-negative integer a sample
COLUMN_NAME = re.compile(r"[a-z0-9_]{1,24}")
MAX_COLUMNS = 4096  # descriptors are checked against the file's length too; this bounds the loop first


def sample_columns_name(shard: str) -> str:
    """The columns file beside a shard: ``train-000001.tar`` -> ``train-000001.tar.cols``."""
    return shard + SAMPLE_COLUMNS_SUFFIX


def check_column_name(name: object, *, source: str = "columns") -> str:
    """A column name as the layout stores it, else a FormatError naming ``source``."""
    if not isinstance(name, str) or not COLUMN_NAME.fullmatch(name):
        raise FormatError(f"{source}: column name {name!r} is not 1-24 characters of [a-z0-9_]")
    return name


def check_dtype(name: str, dtype: object, *, source: str = "columns") -> str:
    if dtype not in DTYPES:
        raise FormatError(f"{source}: column {name!r} has dtype {dtype!r}; known: {', '.join(DTYPES)}")
    if name == COST and dtype not in INTEGER_DTYPES:
        raise FormatError(f"{source}: column 'cost' must be an integer dtype (u1-u8, i1-i8), not {dtype}")
    return str(dtype)


def _aligned(at: int) -> int:
    return (at + 7) & ~7


def _check_values(name: str, values: np.ndarray, source: str) -> None:
    if name != COST or not len(values):
        return
    if values.dtype.kind == "i" and int(values.min()) < 0:
        at = int(np.argmax(values < 0))
        raise FormatError(f"{source}: column 'cost' holds {int(values[at])} at sample {at}; costs are >= 0")


def encode_sample_columns(
    columns: Mapping[str, Sequence[int | float] | np.ndarray], dtypes: Mapping[str, str] | None = None
) -> bytes:
    """The columns file for one shard; ``dtypes`` per name (default: the array's own dtype; i8 for a list
    of ints, f8 for one of floats). ValueError naming the column for a bad name, dtype or value, or for
    columns of different lengths."""
    arrays = [_column(name, values, (dtypes or {}).get(name)) for name, values in columns.items()]
    if len({len(a) for _, _, a in arrays}) > 1:
        raise ValueError("encode_sample_columns: columns of different lengths (one value a sample each)")
    count = len(arrays[0][2]) if arrays else 0
    parts = [HEADER.pack(SAMPLE_COLUMNS_MAGIC, LAYOUT_VERSION, len(arrays), count)]
    parts += [DESCRIPTOR.pack(n.encode("ascii"), c.encode("ascii")) for n, c, _ in arrays]
    at = HEADER.size + DESCRIPTOR.size * len(arrays)
    for _, _, array in arrays:
        parts.append(bytes(_aligned(at) - at))
        data = array.tobytes()
        parts.append(data)
        at = _aligned(at) + len(data)
    return b"".join(parts)


def _column(name: str, values: Any, given: str | None) -> tuple[str, str, np.ndarray]:
    where = "encode_sample_columns"
    try:
        check_column_name(name, source=where)
        array = np.asarray(values)
        if array.ndim != 1:
            raise FormatError(f"{where}: column {name!r} is not one value a sample ({array.ndim} dims)")
        kind = array.dtype.kind if array.size else "f" if given is None else given[0]
        if kind not in "uif":  # bools, strings, objects
            raise FormatError(f"{where}: column {name!r} holds {array.dtype}, not numbers")
        code = check_dtype(name, given or f"{kind}{array.dtype.itemsize if array.size else 8}", source=where)
        if code[0] in "ui" and array.size:
            if kind == "f":
                raise FormatError(f"{where}: column {name!r} holds floats, its dtype is {code}")
            info = np.iinfo(code)
            low, high = int(array.min()), int(array.max())
            if name == COST and low < 0:
                raise FormatError(f"{where}: column 'cost' holds {low}; costs are >= 0")
            if low < info.min or high > info.max:
                raise FormatError(f"{where}: column {name!r} holds {low}..{high}, outside {code}")
    except FormatError as exc:
        raise ValueError(str(exc)) from None
    return name, code, array.astype("<" + code)


def encoded_size(dtypes: Mapping[str, str], samples: int) -> int:
    """The length of a columns file of these columns (name -> dtype code) and ``samples`` samples."""
    at = HEADER.size + DESCRIPTOR.size * len(dtypes)
    for code in dtypes.values():
        at = _aligned(at) + int(code[1]) * samples
    return at


def decode_sample_columns(data: bytes, *, source: str, samples: int | None) -> dict[str, np.ndarray]:
    """The columns of one shard as read-only arrays over ``data`` (no copy); ``samples``: the count the
    index gives the shard (None: unchecked). Every damage is a FormatError naming ``source``."""
    if len(data) < HEADER.size:
        raise FormatError(f"{source}: {len(data)} bytes, shorter than the {HEADER.size}-byte header")
    magic, layout, ncols, n = HEADER.unpack_from(data)
    if magic != SAMPLE_COLUMNS_MAGIC:
        raise FormatError(f"{source}: not a sample columns file (it does not start {SAMPLE_COLUMNS_MAGIC!r})")
    if layout != LAYOUT_VERSION:
        raise FormatError(
            f"{source}: sample columns layout {layout}; this shardstream reads {LAYOUT_VERSION}"
        )
    if samples is not None and n != samples:
        raise FormatError(f"{source}: holds {n} samples, the index says {samples}")
    # Sizes from the header are checked against len(data) before anything is allocated from them.
    if ncols > MAX_COLUMNS or HEADER.size + DESCRIPTOR.size * ncols > len(data):
        raise FormatError(f"{source}: {len(data)} bytes cannot hold the {ncols} columns its header declares")
    found: list[tuple[str, str]] = []
    for i in range(ncols):
        raw_name, raw_code = DESCRIPTOR.unpack_from(data, HEADER.size + DESCRIPTOR.size * i)
        name = _text(raw_name, source, f"column {i}'s name")
        check_column_name(name, source=source)
        if any(name == seen for seen, _ in found):
            raise FormatError(f"{source}: column {name!r} appears twice")
        found.append(
            (name, check_dtype(name, _text(raw_code, source, f"column {name!r}'s dtype"), source=source))
        )
    at, spans = HEADER.size + DESCRIPTOR.size * ncols, []
    for name, code in found:
        start = _aligned(at)
        at = start + int(code[1]) * n
        spans.append((name, code, start))
    if at != len(data):  # the same arithmetic as encoded_size, kept inline for each column's start
        raise FormatError(f"{source}: {len(data)} bytes, but its header describes {at}: truncated or padded")
    out: dict[str, np.ndarray] = {}
    for name, code, start in spans:
        values = np.frombuffer(data, dtype="<" + code, count=n, offset=start)
        if values.flags.writeable:  # a bytearray's view: read-only all the same
            values.flags.writeable = False
        _check_values(name, values, source)
        out[name] = values
    return out


def _text(raw: bytes, source: str, what: str) -> str:
    text = raw.rstrip(b"\0")
    if b"\0" in text:
        raise FormatError(f"{source}: {what} holds a NUL inside it")
    try:
        return text.decode("ascii")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{source}: {what} is not ASCII") from exc


def column_sum(values: np.ndarray) -> int:
    """An integer column's total as a Python int (no overflow past int64)."""
    return int(values.sum(dtype=np.uint64 if values.dtype.kind == "u" else np.int64))
