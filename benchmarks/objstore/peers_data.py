"""The object-store peers benchmark's samples: raw bytes made the same way in every venv (stdlib only).

Sample ``i`` is ``size`` bytes cut from a 16 MiB random block at an offset that moves with ``i``: not
compressible by anything on the way, different from its neighbours, and quick to make (no RNG per sample).
"""

from __future__ import annotations

import functools
import random

BLOCK = 16 * 1024 * 1024


@functools.cache
def block() -> bytes:
    return random.Random(35).randbytes(BLOCK)


def sample_bytes(i: int, size: int) -> bytes:
    """Sample ``i``: ``size`` bytes (``size`` <= 16 MiB)."""
    start = i * 40961 % (BLOCK - size + 1)
    return block()[start : start + size]


def litdata_sample(i: int, size: int) -> dict[str, bytes]:
    """What ``litdata.optimize`` stores for sample ``i``."""
    return {"bin": sample_bytes(i, size)}
