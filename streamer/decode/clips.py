"""Clips and windows: the seconds of a long video or audio member a sample trains on, planned, then decoded.

A video clip is ``seconds`` long at ``fps`` frames a second: the frames played at ``start + k / fps``.
An audio window is ``seconds`` of samples from ``start``. A member gives ``count`` of them, placed by
``where``: ``"random"`` (each start uniform in [0, duration - seconds], drawn from a hash of (seed,
epoch, key, i): the same on a resumed run and on any topology, another next epoch), ``"uniform"``
(evenly spaced from the first second to the last start; no seed) or ``"start"`` (all from 0). A member
shorter than a clip gives its clips from 0, timestamps held within the member (its last frame repeats;
audio is padded with zeros), so every clip has the same shape.

Only the frames a clip plays are decoded: torchcodec seeks to the keyframe before each (``seek_mode``
``"approximate"`` reads the container's index; ``"exact"`` scans it once for frame-accurate times).
Audio decodes from the window's start (WAV and FLAC seek; MP3 and others decode from a nearby frame).
Trade-off: a clip costs a seek and the frames from its keyframe on, so many short clips of a video with
sparse keyframes cost about as much as decoding it whole; a whole-member decode costs its full length.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

WHERE = ("random", "uniform", "start")
SEEK = ("approximate", "exact")


def _positive(name: str, value: Any, whole: bool = False) -> None:
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not value > 0 or not math.isfinite(value):
        kind = "a positive int" if whole else "a positive number"
        raise ValueError(f"{name} must be {kind}, not {value!r}")


@dataclass(frozen=True, kw_only=True)
class ClipOptions:
    """Video clips: ``seconds`` long at ``fps``, ``clips`` a member, placed by ``where`` (see the module),
    resized to ``size`` (height, width; None: as decoded), decoded with torchcodec's ``seek_mode``."""

    seconds: float
    fps: float
    clips: int = 1
    where: str = "random"
    size: tuple[int, int] | None = None
    seek_mode: str = "approximate"

    def __post_init__(self) -> None:
        _positive("video clip seconds", self.seconds)
        _positive("video clip fps", self.fps)
        _positive("video clips", self.clips, whole=True)
        if self.where not in WHERE:
            raise ValueError(f"video clips' where must be one of {', '.join(WHERE)}, not {self.where!r}")
        if self.seek_mode not in SEEK:
            raise ValueError(f"video seek_mode must be one of {', '.join(SEEK)}, not {self.seek_mode!r}")
        if self.size is not None:
            if not (isinstance(self.size, tuple) and len(self.size) == 2):
                raise ValueError(f"video clip size must be (height, width), not {self.size!r}")
            for side in self.size:
                _positive("video clip size", side, whole=True)

    @property
    def frames(self) -> int:
        """Frames a clip holds: ``seconds x fps``, at least 1."""
        return max(1, round(self.seconds * self.fps))


@dataclass(frozen=True, kw_only=True)
class WindowOptions:
    """Audio windows: ``seconds`` long, ``windows`` a member, placed by ``where``, resampled to ``rate``
    (None: the member's own), ``mono`` mixed down to one channel."""

    seconds: float
    windows: int = 1
    where: str = "random"
    rate: int | None = None
    mono: bool = False

    def __post_init__(self) -> None:
        _positive("audio window seconds", self.seconds)
        _positive("audio windows", self.windows, whole=True)
        if self.where not in WHERE:
            raise ValueError(f"audio windows' where must be one of {', '.join(WHERE)}, not {self.where!r}")
        if self.rate is not None:
            _positive("audio window rate", self.rate, whole=True)


def draw(seed: int, epoch: int, key: str, i: int) -> float:
    """A number in [0, 1) from (seed, epoch, key, i) alone: the same in every process and on every run."""
    digest = hashlib.blake2b(f"{seed}\x00{epoch}\x00{key}\x00{i}".encode(), digest_size=8).digest()
    return struct.unpack("<Q", digest)[0] / 2.0**64


def starts(
    duration: float, seconds: float, count: int, where: str, *, seed: int, epoch: int, key: str
) -> list[float]:
    """The start of each of ``count`` clips or windows of ``seconds`` in a member of ``duration``."""
    room = max(duration - seconds, 0.0)
    if where == "start" or room == 0.0:
        return [0.0] * count
    if where == "uniform":
        return [room * i / (count - 1) if count > 1 else room / 2 for i in range(count)]
    return [room * draw(seed, epoch, key, i) for i in range(count)]


def clip_times(start: float, options: ClipOptions, duration: float, last: float | None = None) -> list[float]:
    """The times a clip's frames are played at, each held at or before ``last`` (the member's last frame's
    time; None: just before ``duration``), so a clip past the end repeats its last frame."""
    end = last if last is not None else max(duration - 1e-6, 0.0)
    return [min(start + k / options.fps, end) for k in range(options.frames)]


def clip_options(value: Any) -> ClipOptions | None:
    """``video=`` as ClipOptions: itself, or a mapping in the README's names (``clip_seconds``, ``fps``,
    ``clips``, ``where``, ``size``, ``seek_mode``); None stays None. ValueError naming a wrong key."""
    if value is None or isinstance(value, ClipOptions):
        return value
    names = {"clip_seconds": "seconds", "fps": "fps", "clips": "clips", "where": "where", "size": "size"}
    names["seek_mode"] = "seek_mode"
    fields = _renamed(value, names, "video")
    if isinstance(fields.get("size"), list):
        fields["size"] = tuple(fields["size"])
    try:
        return ClipOptions(**fields)
    except TypeError:
        raise ValueError("video needs at least clip_seconds and fps") from None


def window_options(value: Any) -> WindowOptions | None:
    """``audio=`` as WindowOptions: itself, or a mapping (``window_seconds``, ``windows``, ``where``,
    ``rate``, ``mono``); None stays None. ValueError naming a wrong key."""
    if value is None or isinstance(value, WindowOptions):
        return value
    names = {"window_seconds": "seconds", "windows": "windows", "where": "where", "rate": "rate"}
    names["mono"] = "mono"
    try:
        return WindowOptions(**_renamed(value, names, "audio"))
    except TypeError:
        raise ValueError("audio needs at least window_seconds") from None


def _renamed(value: Any, names: dict[str, str], what: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} must be a mapping of its options ({', '.join(names)}), not {value!r:.80}")
    unknown = [key for key in value if key not in names]
    if unknown:
        raise ValueError(f"{what}: unknown option {unknown[0]!r}; it takes {', '.join(names)}")
    return {names[key]: item for key, item in value.items()}
