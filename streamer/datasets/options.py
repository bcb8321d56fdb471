"""ShardDataset's options in small frozen groups, validated once where they enter: placement, reading, errors.

Decoding options are ``decode.DecodeOptions``. Nodes built from these trust them and check nothing again.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from shardstream.checks import one_of
from shardstream.io.openers import OpenOptions
from shardstream.io.urls import scheme_of

from ..chain.shuffle import check_buffer
from ..decode.fields import Fields
from ..placement.segments import REMAINDERS

ON_ERROR = ("raise", "skip", "warn")


def default_prefetch(first_urls: Iterable[str], readers: int) -> int:
    """Shards read ahead per reader when not given: read-ahead pays off where latency is (remote shards,
    not the page cache or a pipe); one reader keeps two shards ahead, each of several (a mixture's
    sources, up to ``max_open`` of them open) one, so memory does not grow with the sources."""
    remote = any(scheme_of(url) not in ("file", "pipe") for url in first_urls)
    return 0 if not remote else 2 if readers == 1 else 1


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Who reads what: shard order, seed, the epoch's leftover samples, and this process's rank.

    Fields: ``shuffle`` (permute the shard order per ``(seed, epoch)`` and shuffle through the buffer;
    False: index order), ``seed`` (theirs, and resampled draws'), ``remainder`` (``"drop"`` the at most
    world - 1 samples an epoch cannot deal equally to the ranks, or ``"pad"`` with samples from the epoch's
    start), ``resampled`` (draw shards with replacement, endlessly), ``rank`` and ``world_size`` (this
    process's place; None: from torch.distributed, else ``RANK``/``WORLD_SIZE``, else 0 and 1).
    """

    shuffle: bool = True
    seed: int = 0
    remainder: str = "drop"
    resampled: bool = False
    rank: int | None = None  # None: from torch.distributed, else $RANK, else 0
    world_size: int | None = None  # likewise, from $WORLD_SIZE, else 1

    def __post_init__(self) -> None:
        one_of("remainder", self.remainder, REMAINDERS)

    @classmethod
    def of(
        cls, shuffle: bool, seed: int, remainder: str, resampled: bool, rank: int | None, world: int | None
    ) -> Placement:
        """From a dataset's keyword options, in the order its signature gives them."""
        return cls(
            shuffle=shuffle, seed=seed, remainder=remainder, resampled=resampled, rank=rank, world_size=world
        )

    def resolve(self) -> tuple[int, int]:
        """(rank, world size): as given, else from torch.distributed if initialised, else the environment."""
        dist = _distributed_place()
        rank = self.rank if self.rank is not None else (dist[0] if dist else int(os.environ.get("RANK", 0)))
        world = self.world_size
        if world is None:
            world = dist[1] if dist else int(os.environ.get("WORLD_SIZE", 1))
        if world < 1 or not 0 <= rank < world:
            raise ValueError(f"rank must be in [0, world_size), got rank={rank}, world_size={world}")
        return rank, world

    def resolved(self) -> Placement:
        """These options with rank and world fixed now, for workers that cannot see the process group."""
        rank, world = self.resolve()
        return replace(self, rank=rank, world_size=world)


def _distributed_place() -> tuple[int, int] | None:
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None


@dataclass(frozen=True, kw_only=True)
class Reading:
    """How samples are reached and held: where shards open, which members are kept, the shuffle buffer.

    Fields: ``open`` (``OpenOptions``: HTTP settings and the cache), ``fields`` (``decode.fields.Fields``,
    the members kept, a list or mapping as ShardDataset takes, parsed when made; None: all),
    ``buffer_size`` and ``initial`` (samples in the shuffle buffer, and gathered before the first leaves
    it; None: all of it), ``prefetch`` and ``prefetch_bytes`` (shards read ahead per reader,
    and bytes fetched ahead of each), ``zero_copy`` (members as views of mapped local shards) and
    ``defer_reads`` (behind a shuffle buffer, read local samples as they leave it: None when they average
    at least ``SMALL_SAMPLE`` bytes, True always, False never), as in ShardDataset.
    """

    open: OpenOptions = field(default_factory=OpenOptions)
    fields: Fields | None = None  # members kept (others dropped before any buffering)
    buffer_size: int = 1000
    initial: int | None = None  # samples buffered before the first is handed out (default: buffer_size)
    prefetch: int = 0  # shards read ahead in a background thread
    prefetch_bytes: int = 16 << 20
    zero_copy: bool = False  # members as read-only memoryviews into mapped local shards, not bytes
    defer_reads: bool | None = None  # behind a shuffle buffer, local samples read as they leave it

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", Fields.of(self.fields))
        check_buffer(self.buffer_size, self.initial)  # the buffer's own rule, here so errors come at once
        if self.prefetch < 0:
            raise ValueError(f"prefetch must be >= 0, not {self.prefetch}")
        if self.prefetch_bytes < 1:
            raise ValueError(f"prefetch_bytes must be >= 1, not {self.prefetch_bytes}")
        if self.defer_reads is not None and not isinstance(self.defer_reads, bool):
            raise ValueError(
                f"defer_reads must be None (by sample size), True or False, not {self.defer_reads!r}"
            )


@dataclass(frozen=True, kw_only=True)
class Errors:
    """What a damaged sample does: raise, or skip it (with a warning or not), keeping the rank's length.

    Fields: ``on_error`` (``"raise"`` the error; ``"skip"`` the sample quietly; ``"warn"``: skip it with a
    warning), ``keep_length`` (when counts are known, stand in for each skipped sample by repeating the
    next, so every rank keeps its length; False: the rank yields fewer).
    """

    on_error: str = "raise"
    keep_length: bool = True

    def __post_init__(self) -> None:
        one_of("on_error", self.on_error, ON_ERROR)
