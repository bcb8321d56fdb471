"""What the FaultServer does wrong, and which fault one request gets (lists are consumed per request)."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

MAX_STALL_SECONDS = 5.0

IntOrList = int | Sequence[int | None] | None


@dataclass
class Faults:
    """What the FaultServer does wrong. Body faults (``drop_after``, ``stall_after``, ``truncate``) take an
    int (every GET that sends a body) or a list (one value per such GET, in order; None = no fault for that
    one; an empty list = no more faults). Counts are body bytes of *that* response, not file offsets.

    ``only``: fnmatch patterns (``"*.tar"``) of paths the faults apply to; None = all paths. ``forbid``,
    ``redirect``, ``require_headers``, ``ignore_if_range``, ``ignore_range``, ``no_length``, ``max_range`` and
    ``no_etag`` ignore ``only``.
    """

    only: str | Sequence[str] | None = None
    status_codes: Sequence[int] = ()  # the next len() matching requests get these codes, then normal
    retry_after: int | str | None = None  # Retry-After header sent with those codes
    drop_after: IntOrList = None  # send N body bytes then close the connection (FIN; RST if reset=True)
    drop_probability: float = 0.0  # else drop each GET body at a random byte with this probability...
    seed: int = 0  # ...from random.Random(seed), seeded when the faults are set
    reset: bool = False  # drop with a TCP RST (SO_LINGER 0) instead of a clean FIN
    stall_after: IntOrList = None  # send N body bytes, go silent for stall_seconds, then close
    stall_seconds: float = 1.0  # at most MAX_STALL_SECONDS (5 s); cut short when the server stops
    truncate: IntOrList = None  # announce Content-Length N bytes larger than the body, send it, close
    change_after: int | None = None  # after this many requests for a path, serve changed bytes + new ETag
    change_offset: int | None = None  # the byte flipped by a change (default: the middle of the file)
    forbid: str | Sequence[str] = ()  # fnmatch patterns of paths answered with 403
    redirect: bool = True  # /r/<path> answers 302 with Location: /<path>
    require_headers: Mapping[str, str] | None = None  # a request lacking any of these (exact values): 401
    ignore_if_range: bool = False  # serve Range as asked even when If-Range names another version (206)
    ignore_range: bool = False  # answer every GET with the whole object (200), as a server without ranges
    no_length: bool = False  # send no Content-Length: the body ends when the connection closes
    max_range: int | None = None  # a 206 answer carries at most this many bytes (servers that cap ranges)
    no_etag: bool = False  # send no ETag, only Last-Modified (servers that only date their objects)

    def __post_init__(self) -> None:
        if not 0 <= self.stall_seconds <= MAX_STALL_SECONDS:
            raise ValueError(f"stall_seconds must be within [0, {MAX_STALL_SECONDS}]")
        if not 0.0 <= self.drop_probability <= 1.0:
            raise ValueError("drop_probability must be within [0, 1]")
        if any(not 100 <= code <= 599 for code in self.status_codes):
            raise ValueError(f"status codes must be HTTP codes: {self.status_codes}")
        if self.change_after is not None and self.change_after < 0:
            raise ValueError("change_after must be >= 0")

    def copy(self) -> Faults:
        """A copy whose lists the server may consume without touching the caller's."""

        def own(value):
            return list(value) if isinstance(value, (list, tuple)) else value

        return replace(
            self,
            status_codes=list(self.status_codes),
            drop_after=own(self.drop_after),
            stall_after=own(self.stall_after),
            truncate=own(self.truncate),
            only=[self.only] if isinstance(self.only, str) else own(self.only),
            forbid=[self.forbid] if isinstance(self.forbid, str) else list(self.forbid),
            require_headers=dict(self.require_headers) if self.require_headers else None,
        )


class BodyFaults(NamedTuple):
    """The body faults one GET gets, with the settings in force when it was taken (none for a HEAD)."""

    drop: int | None = None
    stall: int | None = None
    truncate: int | None = None
    stall_seconds: float = 0.0
    reset: bool = False
    change_offset: int | None = None

    @property
    def name(self) -> str | None:
        """The fault the log names: a stall at or before the drop point wins, then drop, then truncate."""
        if self.stall is not None and (self.drop is None or self.stall <= self.drop):
            return "stall"
        if self.drop is not None:
            return "drop"
        if self.truncate:
            return "truncate"
        return None

    def cut(self, length: int) -> int:
        """How many of the ``length`` body bytes go out: up to the drop or stall point."""
        return min(x for x in (self.drop, self.stall, length) if x is not None)


def take(spec: IntOrList) -> int | None:
    """The fault value for one request: an int applies every time, a list is consumed one per request."""
    if spec is None or isinstance(spec, int):
        return spec
    return spec.pop(0) if spec else None


def matches(path: str, patterns: Sequence[str] | None) -> bool:
    bare = path.lstrip("/")
    return any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(bare, p) for p in patterns or ())


def changed_byte(version: int, size: int, change_offset: int | None) -> tuple[int, int] | None:
    """``(offset, xor_mask)`` of the byte a changed object (``version`` > 0) serves flipped, or None."""
    if version and size:
        return (size // 2 if change_offset is None else change_offset) % size, (version & 0xFF) or 0xFF
    return None
