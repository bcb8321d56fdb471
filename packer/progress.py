"""A pack's progress: what the packer reports (``ProgressHook``) and the tqdm bar on stderr that draws it.

The library prints nothing unless asked: ``pack(progress=True)`` (or a terminal on stderr) and the CLI draw
``PackBar``. Its total comes from one cheap pass over SOURCE (``count_items``: the same pass a pack in
parts plans with: metadata for tables, a line pass for manifests, a listing for folders) run in a
background thread, so the bar starts at once and gains a total and an ETA when the pass ends.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable
from typing import Any

# Above any real source: cut_source gives one slice, whose count is SOURCE's items.
_ONE_SLICE = 1 << 62


class ProgressHook:
    """What a pack reports as it goes; the base class ignores it all. Called on the packing thread,
    except ``total``, which may come from a counting thread (``wants_total`` asks for that count)."""

    wants_total = False

    def sample(self, nbytes: int) -> None:
        """A sample written: its payload bytes."""

    def shard(self, count: int) -> None:
        """A shard published: its sample count."""

    def reject(self, reject: Any) -> None:
        """An input skipped: the ``Reject`` saying which and why (listed in the rejects file)."""

    def part(self, samples: int, nbytes: int, shards: int, rejects: int = 0) -> None:
        """A whole part packed elsewhere (a Ray task): its samples, payload bytes, shards and rejects."""

    def total(self, items: int) -> None:
        """SOURCE's items (samples and rejects alike), once counted."""

    def resumed(self, items: int) -> None:
        """Items an earlier, interrupted run already packed: this run starts after them."""

    def note(self, text: str) -> None:
        """A stage that takes a while and shows no items (starting a Ray head)."""


def count_items(source: str, manifest_format: str | None = None) -> int | None:
    """SOURCE's items (records, or a folder's samples and rejects), by the pass a pack in parts plans
    with; None where it cannot be counted (the pack itself then reports why)."""
    from shardstream.errors import ShardstreamError

    from .sources import cut_source

    try:
        return sum(piece.count for piece in cut_source(source, _ONE_SLICE, manifest_format))
    except (ShardstreamError, OSError, ValueError):
        return None


def count_in_background(
    hook: ProgressHook, source: str | Iterable[Any], manifest_format: str | None
) -> threading.Thread | None:
    """Hand ``hook.total`` SOURCE's item count: at once for a sized iterable (an HF Dataset), from a
    daemon thread for a path (returned, to wait for at the end), never for a generator. The pool the
    pack loads with is a forkserver's, so a thread here is never copied half-way into a child."""
    if not hook.wants_total:
        return None
    if not isinstance(source, (str, os.PathLike)):
        if hasattr(source, "__len__"):
            hook.total(len(source))  # type: ignore[arg-type]
        return None
    path = os.fspath(source)

    def count() -> None:
        items = count_items(path, manifest_format)
        if items is not None:
            hook.total(items)

    thread = threading.Thread(target=count, name="shardstream-count", daemon=True)
    thread.start()
    return thread


class PackBar(ProgressHook):
    """The progress bar on stderr (tqdm): items done of the total once counted, with an ETA, MB/s, shards
    and rejects. ``quiet``: draw nothing (the counts are still kept)."""

    wants_total = True

    def __init__(self, quiet: bool) -> None:
        from tqdm import tqdm

        class _Tqdm(tqdm):  # type: ignore[misc,type-arg]
            # No monitor thread: tqdm's outlives the bar, and a thread in a process that later forks
            # (DataLoader workers in the same script) can deadlock the child. miniters=1 does its job.
            monitor_interval = 0

        self.bar = _Tqdm(
            unit=" samples", disable=quiet, file=sys.stderr, dynamic_ncols=True, smoothing=0.1, miniters=1
        )
        self.bytes = self.samples = self.shards = self.rejects = 0
        self.quiet = quiet
        self.counted: int | None = None  # set by the counting thread; the packing thread applies it

    def sample(self, nbytes: int) -> None:
        self.bytes += nbytes
        self.samples += 1
        self._advance(1)

    def shard(self, count: int) -> None:
        self.shards += 1  # shards written by this run (a part's count starts again at each part)
        self._postfix()

    def part(self, samples: int, nbytes: int, shards: int, rejects: int = 0) -> None:
        self.samples += samples
        self.bytes += nbytes
        self.shards += shards
        self.rejects += rejects
        self._advance(samples + rejects)
        self._postfix()

    def reject(self, reject: Any) -> None:
        self.rejects += 1
        self._advance(1)

    def total(self, items: int) -> None:
        self.counted = items  # only a plain store here: tqdm is drawn from the packing thread alone

    def resumed(self, items: int) -> None:
        if not self.quiet:
            self.bar.initial += items  # done before this run: in the count, not in the rate
            self.bar.n += items
            self.bar.refresh()

    def note(self, text: str) -> None:
        if not self.quiet:
            self.bar.write(text, file=sys.stderr)

    def _advance(self, items: int) -> None:
        if self.quiet:
            return
        if self.counted is not None and self.bar.total != self.counted:
            self.bar.total = self.counted
        self.bar.update(items)
        if self.samples % 256 == 0:
            self._postfix()

    def _postfix(self) -> None:
        if self.quiet:
            return
        elapsed = max(self.bar.format_dict.get("elapsed", 0) or 0, 1e-6)
        self.bar.set_postfix(
            MBps=f"{self.bytes / elapsed / 1e6:.1f}", shards=self.shards, rejects=self.rejects, refresh=False
        )

    def close(self) -> None:
        if self.counted is not None and not self.quiet:
            self.bar.total = self.counted
        self._postfix()
        self.bar.close()
