"""A shard's offsets sidecar: loaded (and trusted only while a local shard keeps its indexed size), and
fetched while the shard's stream opens when it is read from its first byte.

Trade-off: a remote shard read from its start needs its sidecar only to check where each sample ends, so
the sidecar's request need not come first: sent from a thread of its own, it overlaps the stream's first
request, and the first sample waits one round trip instead of two. The thread lives for that one fetch
(started, joined, gone: none outlives the open, so a fork never copies one mid-request) and costs about
0.1 ms against a round trip of 20-100 ms; a local shard, or a sidecar already at hand, opens as before.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from shardstream.errors import FormatError, ShardReadError, redact_url
from shardstream.format import decode_offsets
from shardstream.io.openers import OpenOptions, read_small, seekable
from shardstream.io.urls import local_path, scheme_of
from shardstream.userwarn import warn_user

from ..placement.shards import ShardList


def open_beside_offsets(
    load_offsets: Callable[[], Any],
    open_at: Callable[[int], BinaryIO],
    on_offsets: Callable[[Any], None] | None = None,
) -> tuple[Any, BinaryIO]:
    """(offsets, stream): ``load_offsets()`` in a thread while ``open_at(0)`` opens the stream; a sidecar
    whose first sample does not start at byte 0 (a tar that leads with another member) opens the stream
    again at that byte. An error from either is raised once both are done, the stream closed.
    ``on_offsets``: told the offsets in that thread as soon as they come, while the open may still wait
    (so a watchdog can name the byte a stalled open is at)."""
    fetched: dict[str, Any] = {}

    def fetch() -> None:
        try:
            fetched["offsets"] = offsets = load_offsets()
            if on_offsets is not None:
                on_offsets(offsets)
        except BaseException as exc:  # raised in the opening thread, below
            fetched["error"] = exc

    thread = threading.Thread(target=fetch, name="shardstream-sidecar", daemon=True)
    thread.start()
    try:
        stream = open_at(0)
    finally:
        thread.join()
    try:
        if "error" in fetched:
            raise fetched["error"]
        offsets = fetched["offsets"]
        start = int(offsets[0]) if offsets is not None and len(offsets) else 0
        if start:
            stream.close()
            stream = open_at(start)
    except BaseException:
        stream.close()
        raise
    return offsets, stream


def load_offsets(shards: ShardList, shard: int, options: OpenOptions) -> Any:
    """Shard ``shard``'s sample offsets (an array of n+1) from its sidecar; None when it has none, when
    its stream cannot seek, or when a local shard changed since it was indexed. Thread-safe."""
    if not seekable(shards.urls[shard]):
        return None
    url = shards.offsets_url(shard)
    data = read_small(url, options, version=shards.metadata_version)
    if data is None:
        return None
    if not as_indexed(shards, shard):
        return None  # read by its own headers, as a shard without a sidecar is
    counts = shards.shard_counts
    expected = int(counts[shard]) if counts is not None else None
    try:
        return decode_offsets(data, source=url, samples=expected)
    except FormatError as exc:  # a shard's damage like any other: on_error="skip" counts it and goes on
        raise ShardReadError(f"{exc}; run shardstream index again", url=shards.urls[shard]) from exc


def as_indexed(shards: ShardList, shard: int) -> bool:
    """Whether a local shard still has the size its index gives, so its sidecar can be trusted: one
    stat per shard. One that does not is read front to back by its own headers (a warning says so):
    the samples before a cut are still good, and a rewritten shard gives what its bytes hold. A remote
    shard is checked sample by sample instead: each must hold one key and end where the sidecar says."""
    sizes, url = shards.sizes, shards.urls[shard]
    if sizes is None or scheme_of(url) != "file":
        return True
    try:
        found = os.stat(local_path(url))
    except OSError:
        return True  # opening the shard reports it
    if not stat.S_ISREG(found.st_mode) or found.st_size == sizes[shard]:
        return True  # (opening what is not a regular file reports what it is)
    warn_user(
        f"{redact_url(url)}: the shard is {found.st_size} bytes, its index says {int(sizes[shard])}: it "
        "changed after it was indexed, so its offsets sidecar is not used (reading it from its start); "
        "run `shardstream index` again"
    )
    return False
