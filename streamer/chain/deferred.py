"""Deferred reads: behind a shuffle buffer, a local shard's sample is read when it leaves the buffer.

The buffer then holds sample ids, not bytes: filling it costs no memory and no page faults, the first
sample waits for one read instead of ``initial`` reads, a restore re-reads nothing, and the stream is the
same, sample for sample. The price is one positioned read (pread) per sample instead of a front-to-back
stream; so that the disk still reads in order, the pages of the ids entering the buffer are requested
ahead (``posix_fadvise`` WILLNEED) and the random hand-out finds them in the page cache. Plain local
shards with an offsets sidecar defer; remote ones (s3://, HTTP) only where a dataset asks with
``defer_reads=True``, read by spans of the samples the buffer wants (``coalesce.py``); the others
(pipes, compressed, no sidecar) are read as they enter. By default a shard whose samples average under
``SMALL_SAMPLE`` bytes is read as its samples enter too: for small samples the pread costs more than
holding their bytes (``benchmarks/results/defer-crossover-2026-12-04.md``), and a buffer of them holds
at most ``buffer_size`` x ``SMALL_SAMPLE`` bytes. ``defer_reads=True`` defers every shard that can.
"""

from __future__ import annotations

import bisect
import os
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from shardstream.buffers import CHUNKS
from shardstream.errors import ShardReadError, StaleSidecarError, StreamError, redact_url
from shardstream.format.constants import BLOCK
from shardstream.format.window import ShardMapping
from shardstream.io.localfiles import open_regular_fd
from shardstream.io.urls import local_path, scheme_of

from .coalesce import CoalescedReads, RemoteShard, coalescable
from .node import Item, Node
from .onesample import sample_in
from .opener import ShardOpener
from .recovery import Recovery

DEFERRED = None  # the sample of an item whose bytes are read when it is handed out (a sample is a dict)
ADVISE_BYTES = 8 << 20  # how far ahead of the ids entering the buffer their pages are requested
OPEN_SHARDS = 32  # shards kept open at once, least recently used closed first
# Below this mean sample size (tar bytes, headers included) a shard is read as it enters the buffer. On 2
# cores, buffer 100/1000, a pread a sample ran at 0.68-0.71 of a front-to-back read with 2 KB samples,
# 0.86-0.92 at 9.7 KB, 0.97-1.16 at 18 KB, 1.21-1.85 at 66 KB (benchmarks/stream/defer_crossover_bench.py).
SMALL_SAMPLE = 16 << 10
_WILLNEED = getattr(os, "POSIX_FADV_WILLNEED", None)


class _OpenShard:
    """A shard's descriptor and sidecar; the descriptor closes with the last reference to this (a mapping
    handed out in members holds its own)."""

    __slots__ = ("fd", "mapping", "offsets", "path", "size", "url", "view")

    def __init__(self, fd: int, path: str, offsets: Any, url: str) -> None:
        self.fd, self.path, self.offsets, self.url = fd, path, offsets, url
        self.size = os.fstat(fd).st_size  # what a sidecar's span may reach: never read (or allocate) past it
        self.mapping: ShardMapping | None = None
        self.view: memoryview | None = None

    def __del__(self) -> None:
        os.close(self.fd)


class DeferredReads:
    """Single samples of plain local shards, each one pread (or one slice of the mapped shard, with
    ``zero_copy``), and of remote ones by spans; keeps the last ``keep`` shards' descriptors and sidecars.
    ``small``: shards whose samples average fewer bytes are not deferred (0: every shard that can be).
    ``remote``: remote shards defer too, by ``CoalescedReads`` spans (its ``span`` and ``budget``),
    told the ids entering the buffer by ``advise`` and a restored buffer's by ``want``."""

    def __init__(
        self, opener: ShardOpener, *, keep: int = OPEN_SHARDS, small: int = SMALL_SAMPLE, remote: bool = False
    ) -> None:
        self.opener = opener
        self.keep = keep
        self.small = small
        self.coalesced = CoalescedReads(opener.options) if remote else None
        self._open: OrderedDict[int, _OpenShard | RemoteShard | None] = OrderedDict()
        self._last_shard, self._last = -1, None  # the shard read last: most reads are of the same one
        self._scratch = CHUNKS.take()  # one reused buffer: no allocation, no page faults per sample
        self._cut: set[int] = set()  # shards found shorter than their sidecars say
        self._stale: set[int] = set()  # shards found not to match their sidecars: none of it is read
        self._cut_now: int | None = None

    def offsets(self, shard: int) -> Any:
        """The shard's sidecar offsets when its samples can be read one by one, else None."""
        entry = self._entry(shard)
        return entry.offsets if entry is not None else None

    def _entry(self, shard: int) -> _OpenShard | RemoteShard | None:
        if shard in self._open:
            self._open.move_to_end(shard)
            entry = self._open[shard]
        else:
            entry = self._opened(shard)
            self._open[shard] = entry
            if len(self._open) > self.keep:
                self._forget(self._open.popitem(last=False)[1])
        self._last_shard, self._last = shard, entry
        return entry

    def _opened(self, shard: int) -> _OpenShard | RemoteShard | None:
        url = self.opener.shards.urls[shard]
        local = scheme_of(url) == "file"
        if not local and (self.coalesced is None or not coalescable(url, self.opener.options)):
            return None
        try:
            offsets = self.opener.offsets(shard)  # None for a compressed shard, which cannot seek
        except (
            StreamError
        ):  # an unreadable sidecar: read front to back, where it is reported as for any shard
            return None
        if offsets is None or len(offsets) < 2:
            return None
        if offsets[-1] - offsets[0] < self.small * (len(offsets) - 1):  # small samples: read as they enter
            return None
        if not local:
            sizes = self.opener.shards.sizes
            return RemoteShard(url, offsets, int(sizes[shard]) if sizes is not None else None)
        path = os.path.abspath(local_path(url))
        try:
            fd = open_regular_fd(path)
        except OSError:  # read front to back instead, where the error is reported as for any shard
            return None
        return _OpenShard(fd, path, offsets, redact_url(url))  # as every sample and error shows it

    def advise(self, shard: int, first: int, end: int) -> int:
        """Ask the kernel for the pages of samples ``first``.. (about ADVISE_BYTES, at most to ``end``);
        return the sample at which to ask again."""
        entry = self._entry(shard)
        if entry is None:
            return end
        if isinstance(entry, RemoteShard):  # the ids of the segment are all wanted: asked for once
            self.coalesced.want(entry, first, end, self.opener.shards.urls[shard])  # type: ignore[union-attr]
            return end
        offsets = entry.offsets
        start = offsets[first]
        upto = bisect.bisect_left(offsets, start + ADVISE_BYTES, first + 1, end)
        length = min(offsets[upto], entry.size) - start  # within the file: a sidecar may say otherwise
        if _WILLNEED is not None and length > 0:
            os.posix_fadvise(entry.fd, start, length, _WILLNEED)
        return upto

    def read(self, shard: int, index: int) -> dict[str, Any]:
        """Sample ``index`` of ``shard``; ShardReadError naming the shard and offset when it cannot be."""
        entry = self._last if self._last_shard == shard else self._entry(shard)
        if entry is None or index + 1 >= len(entry.offsets):
            url = self.opener.shards.urls[shard]
            raise ShardReadError(f"sample {index} cannot be read: the shard or its sidecar is gone", url=url)
        if shard in self._stale:  # found not to match its sidecar: no offset into it is trusted any more
            raise StaleSidecarError(
                f"sample {index} not read: the shard no longer matches its offsets sidecar; run "
                "`shardstream index` again",
                url=entry.url,
            )
        start, end = entry.offsets[index], entry.offsets[index + 1]
        # Changed since its sidecar was written, or a hostile sidecar: read nothing (a remote shard's size
        # is the index's, when there is one).
        if entry.size is not None and end > entry.size:
            self._lost(shard)
            raise ShardReadError(
                f"the offsets sidecar puts sample {index} at bytes {start}..{end}, past the shard's "
                f"{entry.size}: the shard changed after its sidecar was written; run `shardstream index` "
                "again",
                url=entry.url,
                offset=start,
            )
        # The next sample's header comes with this one's bytes (sample_in checks it starts another key).
        if self.opener.zero_copy and isinstance(entry, _OpenShard):
            if entry.mapping is None:
                entry.mapping = ShardMapping.of(entry.fd, entry.path)
                entry.view = memoryview(entry.mapping)
            buf, members, pos, stop, limit = entry.mapping, entry.view, start, end, entry.size
        else:
            buf, limit = self._span(entry, shard, index, start, end - start + BLOCK)
            members, pos, stop = buf, 0, (limit if limit < end - start else end - start)
            if stop < end - start:
                self._lost(shard)
                raise ShardReadError(
                    f"shard ends inside sample {index} ({stop} of its {end - start} bytes): it was cut "
                    "short or rewritten after its offsets sidecar was written",
                    url=entry.url,
                    offset=start + stop,
                )
        mapping = entry.mapping if isinstance(entry, _OpenShard) and buf is entry.mapping else None
        try:
            sample = sample_in(
                buf, members, pos, stop, url=entry.url, start=start, end=end, mapping=mapping, limit=limit
            )
        except StaleSidecarError:
            self._lost(shard)
            self._stale.add(shard)
            raise
        return self.opener.keep_fields(sample)

    def _span(
        self, entry: _OpenShard | RemoteShard, shard: int, index: int, start: int, size: int
    ) -> tuple[Any, int]:
        """Sample ``index``'s bytes and the next header: a pread, or a remote shard's coalesced read."""
        if isinstance(entry, RemoteShard):
            data = self.coalesced.take(self.opener.shards.urls[shard], entry, index)  # type: ignore[union-attr]
            return data, len(data)
        return self._pread(entry, start, size)

    def _pread(self, entry: _OpenShard, start: int, size: int) -> tuple[Any, int]:
        """The span's bytes and how many were read (fewer: the shard was cut short since it was indexed)."""
        try:
            if size > len(self._scratch):  # larger than the reused buffer: a buffer of its own
                data = os.pread(entry.fd, size, start)
                return data, len(data)
            with memoryview(self._scratch) as view:
                return self._scratch, os.preadv(entry.fd, [view[:size]], start)
        except OSError as exc:
            raise ShardReadError(f"read failed: {exc}", url=entry.url, offset=start) from exc

    def _lost(self, shard: int) -> None:
        """``shard`` is shorter than its sidecar says: counted as a failed shard the first time only."""
        self._cut_now = None if shard in self._cut else shard
        self._cut.add(shard)

    def newly_cut(self, shard: int) -> bool:
        """Whether the read that just failed found ``shard`` cut short, for the first time (a shard lost)."""
        cut, self._cut_now = self._cut_now == shard, None
        return cut

    def want(self, ids: Any) -> None:
        """A restored buffer's ``(shard, index)`` ids will leave it: remote ones are read by spans too."""
        if self.coalesced is None:
            return
        for shard, index in ids:
            entry = self._entry(shard)
            if isinstance(entry, RemoteShard) and 0 <= index < len(entry.state):
                self.coalesced.want(entry, index, index + 1)

    def _forget(self, entry: _OpenShard | RemoteShard | None) -> None:
        if isinstance(entry, RemoteShard):
            self.coalesced.release(entry)  # type: ignore[union-attr]

    def close(self) -> None:
        """Close every shard now rather than when this is collected (reading again reopens them)."""
        for entry in self._open.values():
            self._forget(entry)
        if self.coalesced is not None:
            self.coalesced.close()
        self._open.clear()
        self._last_shard, self._last = -1, None


def deferred_reads(
    opener: ShardOpener,
    defer: bool | None,
    first: int | None,
    *,
    keep: int = OPEN_SHARDS,
    remote: bool = False,
) -> DeferredReads | None:
    """What ``defer_reads`` asks for behind a shuffle buffer: None defers local shards of samples of at
    least ``SMALL_SAMPLE`` bytes on average, True every shard that can be, False none (the result is None).
    ``remote``: with True, remote shards too, by coalesced spans (a chain whose reader ``advise``s them).

    By the size rule, a reader whose ``first`` shard is not deferred (small samples, a remote or compressed
    shard) defers none: its chain then has no fetch stage, which cost a mixture of small samples 4-8%."""
    if defer is False:
        return None
    small = SMALL_SAMPLE if defer is None else 0
    reads = DeferredReads(opener, keep=keep, small=small, remote=remote and defer is True)
    if defer is None and (first is None or reads.offsets(first) is None):
        reads.close()
        return None
    return reads


class Fetch(Node):
    """Reads each deferred sample as it comes out of ``source`` (the shuffle buffer); other items pass.
    A sample that cannot be read is the Recovery's, as a damaged sample read in order would be. Its state
    is its source's, as is: a checkpoint reads the same with deferred reads on or off."""

    def __init__(self, source: Node, reads: DeferredReads, recovery: Recovery | None = None) -> None:
        super().__init__()
        self.source = source
        self.reads = reads
        self.recovery = recovery or Recovery()

    def _current_state(self) -> dict[str, Any]:
        return self._source_state()

    def read_one(self, shard: int, index: int) -> Any:
        sample = super().read_one(shard, index)
        return self.reads.read(shard, index) if sample is DEFERRED else sample

    def _generate(self, state: dict[str, Any] | None) -> Iterator[Item]:
        self.reads.close()  # a pass abandoned midway leaves wanted ids and held bytes: none carry over
        self.source.reset(state)  # type: ignore[union-attr]
        if state and isinstance(self.reads, DeferredReads):  # a restored buffer's ids leave it too
            self.reads.want(state.get("buffer", ()))
        read, recovery = self.reads.read, self.recovery
        for item in self.source:  # type: ignore[union-attr]
            if item[2] is not DEFERRED:
                yield item
                continue
            shard, index, _ = item
            try:
                sample = read(shard, index)
            except StreamError as exc:
                recovery.after_lost_sample(exc, shard_failed=self.reads.newly_cut(shard))
                continue
            yield shard, index, sample
        self.reads.close()  # the pass is over (a pass abandoned midway closes them when collected)
