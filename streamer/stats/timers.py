"""The decoding clock: seconds spent decoding, per reading thread, split by kind of member; ~0.1 us a sample.

Each decoded sample is timed (``Mapper``); which kind of member the time went to is measured member by
member on one sample in ``KIND_EVERY`` (``SampleDecoder``) and scaled to the total. Waiting on bytes
and opening shards have their clocks in the torch-free core (``shardstream.io.iostats.thread_clock``).
Trade-off: two clock reads per decoded sample, nothing per raw sample.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from shardstream.mediatypes import AUDIO_EXTENSIONS, IMAGE_EXTENSIONS, VIDEO_EXTENSIONS

KINDS = ("image", "audio", "video", "text", "other")
TEXT_EXTENSIONS = frozenset({"txt", "text", "json", "jsonl", "cls", "cls2", "id", "index", "html", "md"})
KIND_EVERY = 16  # one decoded sample in this many is timed member by member


class DecodeClock:
    """One thread's decoding: ``decode`` (seconds, every sample), ``kinds`` (seconds member by member, on
    the samples measured so) and ``countdown`` (samples until the next one measured by kind)."""

    __slots__ = ("countdown", "decode", "kinds")

    def __init__(self) -> None:
        self.decode = 0.0
        self.countdown = 1
        self.kinds = dict.fromkeys(KINDS, 0.0)


_local = threading.local()


def decode_clock() -> DecodeClock:
    """The calling thread's decoding clock (made on first use)."""
    try:
        return _local.clock
    except AttributeError:
        _local.clock = DecodeClock()
        return _local.clock


def kind_of(member: str) -> str:
    """A member's kind by its last extension: image, audio, video, text, or other."""
    ext = member.rsplit(".", 1)[-1].lower()
    if ext in IMAGE_EXTENSIONS:
        return "image"
    if ext in AUDIO_EXTENSIONS:
        return "audio"
    if ext in VIDEO_EXTENSIONS:
        return "video"
    return "text" if ext in TEXT_EXTENSIONS else "other"


def timed_into(fn: Callable[[bytes], Any], kind: str, data: bytes) -> Any:
    """``fn(data)``, its seconds added to the calling thread's ``kind``."""
    started = time.perf_counter()
    try:
        return fn(data)
    finally:
        decode_clock().kinds[kind] += time.perf_counter() - started
