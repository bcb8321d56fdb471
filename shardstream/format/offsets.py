"""Per-shard offsets sidecar: little-endian uint64 start of each sample's first header, plus the end.

N samples give N + 1 numbers; sample i spans bytes [off[i], off[i+1]), so a reader starts at any sample
with one seek or one HTTP Range request. Raw uint64 keeps it readable by ``numpy.fromfile(path, "<u8")``.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Sequence

import numpy as np

from ..errors import FormatError
from .constants import OFFSETS_SUFFIX


def offsets_name(shard: str) -> str:
    return shard + OFFSETS_SUFFIX


def encode_offsets(offsets: Sequence[int]) -> bytes:
    values = array("Q", offsets)
    if struct.pack("=I", 1) != struct.pack("<I", 1):
        values.byteswap()
    return values.tobytes()


def decode_offsets(data: bytes, *, source: str = "offsets", samples: int | None = None) -> array:
    if len(data) % 8:
        raise FormatError(f"{source}: length {len(data)} is not a multiple of 8")
    values = array("Q")
    values.frombytes(data)
    if struct.pack("=I", 1) != struct.pack("<I", 1):
        values.byteswap()
    if samples is not None and len(values) != samples + 1:
        raise FormatError(f"{source}: holds {len(values) - 1} samples, the index says {samples}")
    ordered = np.frombuffer(values, dtype=np.uint64)  # a Python loop took 0.2 ms a shard of 1,000
    if np.any(ordered[1:] < ordered[:-1]):
        raise FormatError(f"{source}: offsets are not increasing")
    return values
