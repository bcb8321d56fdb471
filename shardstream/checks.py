"""Option checks shared by packer and streamer: each raises ValueError naming the argument, never asserts."""

from __future__ import annotations

from typing import Any


def is_positive_int(value: Any) -> bool:
    """An int >= 1 that is not a bool (True is an int to Python, not a count to a user)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def positive_int_or_none(name: str, value: Any, unit: str = "") -> None:
    """Raise ValueError naming ``name`` unless ``value`` is None or a positive integer."""
    if value is not None and not is_positive_int(value):
        raise ValueError(f"{name} must be a positive integer{unit}, not {value!r}")


def one_of(name: str, value: Any, allowed: tuple[Any, ...]) -> None:
    """Raise ValueError naming ``name`` and the choices unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(str, allowed))}, not {value!r}")
