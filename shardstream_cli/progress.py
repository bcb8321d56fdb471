"""The pack's progress bar: what the packer's ProgressHook reports, drawn by tqdm on stderr."""

from __future__ import annotations

import sys
from typing import Any


class PackBar:
    """The progress bar: what ``pack``'s ProgressHook reports, on stderr (tqdm), with MB/s and rejects."""

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

    def sample(self, nbytes: int) -> None:
        self.bytes += nbytes
        self.samples += 1
        if self.quiet:
            return
        self.bar.update(1)
        if self.samples % 256 == 0:
            self._postfix()

    def shard(self, count: int) -> None:
        self.shards += 1  # shards written by this run (a part's count starts again at each part)
        self._postfix()

    def part(self, samples: int, nbytes: int, shards: int) -> None:
        self.samples += samples
        self.bytes += nbytes
        self.shards += shards
        if not self.quiet:
            self.bar.update(samples)
            self._postfix()

    def reject(self, reject: Any) -> None:
        self.rejects += 1

    def _postfix(self) -> None:
        if self.quiet:
            return
        elapsed = max(self.bar.format_dict.get("elapsed", 0) or 0, 1e-6)
        self.bar.set_postfix(
            MBps=f"{self.bytes / elapsed / 1e6:.1f}", shards=self.shards, rejects=self.rejects, refresh=False
        )

    def close(self) -> None:
        self._postfix()
        self.bar.close()
