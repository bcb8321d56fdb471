"""Media lengths read from container headers, as per-sample columns: what clip planning, budgets and
``where=`` filters can know without decoding; a header's figures, not a decode's (a damaged stream may
hold fewer frames than it declares).

``media_columns`` is a ``shardstream columns --fn`` function (``shardstream.mediaprobe:media_columns``):
for each sample, its first video member's ``video_ms`` (duration, milliseconds) and ``video_frames``, and
its first audio member's ``audio_ms`` and ``audio_rate`` (Hz). A sample without such a member gets 0; a
member whose header cannot be read (not media, cut short) gets -1, so ``where="video_ms > 0"`` keeps the
samples with a readable video and ``video_ms == -1`` finds the damaged ones. Frames: torchcodec's
``num_frames`` (the header's count, else duration x average rate when the container keeps none: WebM).
``member_seconds`` is one member's duration, what ``--cost @estimate``'s per-second tokens count.
Torch-free at import: torchcodec (the ``video`` extra) is imported at the first probe.
"""

from __future__ import annotations

import math
from typing import Any

from .extras import require
from .mediatypes import AUDIO_EXTENSIONS, VIDEO_EXTENSIONS

COLUMNS = ("video_ms", "video_frames", "audio_ms", "audio_rate")
UNREADABLE = -1  # a member whose header could not be read


def media_columns(sample: dict[str, Any]) -> dict[str, int]:
    """The sample's media columns (see the module); needs torchcodec (and FFmpeg)."""
    out = dict.fromkeys(COLUMNS, 0)
    video = audio = False
    for name, data in sample.items():
        if name.startswith("__") or not isinstance(data, (bytes, bytearray, memoryview)):
            continue
        ext = name.rsplit(".", 1)[-1].lower()
        if ext in VIDEO_EXTENSIONS and not video:
            video = True
            out["video_ms"], out["video_frames"] = _video(bytes(data))
        elif ext in AUDIO_EXTENSIONS and not audio:
            audio = True
            out["audio_ms"], out["audio_rate"] = _audio(bytes(data))
    return out


def member_seconds(ext: str, data: bytes) -> float | None:
    """A video or audio member's duration from its header, in seconds; None when it cannot be read (or
    ``ext`` is neither)."""
    kind = ext.rsplit(".", 1)[-1].lower()
    if kind in VIDEO_EXTENSIONS:
        ms = _video(bytes(data))[0]
    elif kind in AUDIO_EXTENSIONS:
        ms = _audio(bytes(data))[0]
    else:
        return None
    return ms / 1000 if ms >= 0 else None


def _decoders() -> Any:
    return require("torchcodec.decoders", "reading media lengths", "video")


def _video(data: bytes) -> tuple[int, int]:
    """(milliseconds, frames) from the header; (-1, -1) when it cannot be read."""
    decoders = _decoders()
    try:  # approximate: the container's header only, no scan of the stream
        meta = decoders.VideoDecoder(data, seek_mode="approximate").metadata
    except (RuntimeError, ValueError):
        return UNREADABLE, UNREADABLE
    seconds = meta.duration_seconds
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return UNREADABLE, UNREADABLE
    frames = meta.num_frames  # torchcodec's: the header's count, else duration x average rate (WebM)
    return round(seconds * 1000), int(frames) if frames is not None else UNREADABLE


def _audio(data: bytes) -> tuple[int, int]:
    """(milliseconds, sample rate) from the header; (-1, -1) when it cannot be read."""
    decoders = _decoders()
    try:
        meta = decoders.AudioDecoder(data).metadata
    except (RuntimeError, ValueError):
        return UNREADABLE, UNREADABLE
    seconds, rate = meta.duration_seconds_from_header, meta.sample_rate
    if rate is None:
        return UNREADABLE, UNREADABLE
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return UNREADABLE, int(rate)
    return round(seconds * 1000), int(rate)
