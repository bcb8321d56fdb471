"""Byte sizes as people write them: ``256MB`` is 10^6-based, ``1GiB`` 2^30-based, a bare number is bytes."""

from __future__ import annotations

import re

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


def parse_size(text: str | int, *, name: str = "max_size") -> int:
    """Bytes from ``256MB`` (10^6), ``1GiB`` (2^30), ``4096`` or an int; errors name option ``name``."""
    if isinstance(text, bool):
        raise ValueError(f"{name} must be a size like 256MB, not {text!r}")
    if isinstance(text, int):
        value = text
    else:
        match = _SIZE.match(str(text))
        if not match:
            raise ValueError(f"{name}: cannot read {text!r} as a size; use e.g. 256MB, 1GiB or 1048576")
        number, unit = match.groups()
        unit = unit.lower()
        letter = unit[:1] if unit[:1] != "b" else ""
        scale = 1024 ** ("kmgt".index(letter) + 1) if "i" in unit else _UNITS[letter]
        value = int(float(number) * scale)
    if value <= 0:
        raise ValueError(f"{name} must be positive, not {text!r}")
    return value


def format_size(size: int) -> str:
    """``1234567`` -> ``1.2 MB``: decimal units, as ``parse_size`` reads them back (to display precision)."""
    for unit, scale in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if abs(size) >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"
