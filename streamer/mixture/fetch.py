"""A mixture's deferred reads: each sample id leaving a window is read by its own source's reader.

A source's window holds sample ids where its samples are large (``chain/deferred.py``): a ``Fetch`` after
the mixture's reader reads each one as it is handed out, through the ``DeferredReads`` of the source whose
shards hold it (its fields, its descriptors), and tags it with the source. Reading a source counts as
using it, so at most ``max_open`` sources keep shards open. Trade-off: one pread per large sample, for a
buffer that holds ids rather than bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..chain.deferred import DeferredReads
from .source import source_of
from .windows import SourceWindows


class SourceReads:
    """The ``reads`` of a mixture's ``Fetch``: ``read``, ``newly_cut`` and ``close``, routed by shard to the
    source whose shards begin at ``bases[j]``; ``touch`` is told when another source is read."""

    def __init__(
        self, sources: Sequence[SourceWindows], bases: Sequence[int], touch: Callable[[SourceWindows], None]
    ) -> None:
        self.sources = list(sources)
        self.bases = list(bases)
        self.touch = touch
        self._last: SourceWindows | None = None

    def _reads(self, shard: int) -> DeferredReads:
        source = self.sources[source_of(self.bases, shard)]
        if source is not self._last:  # another source: it is in use now (its shards stay open)
            self._last = source
            self.touch(source)
        assert source.deferred is not None  # only a deferring source's reader hands out ids
        return source.deferred

    def read(self, shard: int, index: int) -> dict[str, Any]:
        sample = self._reads(shard).read(shard, index)
        sample["__source__"] = self._last.name  # type: ignore[union-attr]
        return sample

    def newly_cut(self, shard: int) -> bool:
        return self._reads(shard).newly_cut(shard)

    def close(self) -> None:
        for source in self.sources:
            if source.deferred is not None:
                source.deferred.close()
        self._last = None
