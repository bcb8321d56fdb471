"""ShardDataset: tar shards into PyTorch — placed per rank and worker, shuffled, decoded, resumable.

``__init__`` only checks and groups the options (``options.py``, ``decode.DecodeOptions``); ``__iter__``
only assembles the chain for this rank, worker and epoch (``shardchain.py``; resumption:
``shardresume.py``):

    SampleReader -> ShuffleBuffer -> Fetch -> Mapper(decode) -> StandIns -> sample dicts

each a node with ``reset(state)``/``get_state()``, so the dataset's state is the chain's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from shardstream.io.httpoptions import HttpOptions, bind
from shardstream.io.objstoreoptions import ObjectStoreOptions
from shardstream.io.openers import OpenOptions

from ..budget.plan import SlotPlan
from ..budget.setup import (
    budget_of,
    budget_plan,
    budget_steps,
)
from ..chain.node import Node
from ..chain.skips import check_skipping
from ..decode.make import make_decoder
from ..elastic.deal import Plan
from ..placement.segments import (
    rank_quota,
)
from ..placement.shards import ShardList
from ..placement.subsets import select
from ..stats.options import MonitorOptions
from .base import Place, StreamBase
from .options import Errors, Placement, Reading, default_prefetch
from .shardchain import build_shard_chain
from .shardresume import ShardResume


class ShardDataset(ShardResume, StreamBase):
    """Samples from tar shards: every sample once per epoch, equal counts on every rank, resumable.

    Where: ``source`` is a brace pattern of paths or URLs (``data/train-{000000..000127}.tar``), a list of
    them, or the packer's index (its path, URL or folder). With the index, sample counts are known and
    every rank yields exactly ``len(ds)`` samples per epoch, worker i of every rank the same number.

    Order: ``shuffle`` (the shard order per ``(seed, epoch)`` and a buffer; False reads in index order),
    ``seed``, ``buffer_size`` (samples in the shuffle buffer; 1 turns it off), ``initial`` (samples
    gathered before the first leaves the buffer; None: all of it), ``remainder`` (``"drop"`` or ``"pad"``
    the at most world - 1 samples an epoch cannot deal equally), ``resampled`` (draw shards with
    replacement, forever).

    Decoding, after the buffer: ``fields`` (the members to keep; None: all; ``["jpg", "json"]``: those;
    ``{"image": "jpg;png;webp", "meta": "json"}``: per name, the first of its members the sample has,
    decoded by its own extension and handed out under the name; a sample lacking an entry is a
    ``MissingMemberError`` listing what it holds, also with ``decode=False``), ``decode`` (True: by
    extension; False: bytes; a callable: your own function of the sample dict, in place of decoding,
    given the members ``fields`` keeps as stored), ``image``
    (``"pil"``, ``"numpy"`` or ``"torch"``), ``image_size`` (decode at least this size, reduced where the
    codec can), ``audio_rate``, ``audio_mono``, ``video_frames`` (N evenly spaced frames), ``video``
    and ``audio`` (clips and windows of long members, decoding only those seconds: ``DecodeOptions``),
    ``decoders`` (``{"ext": fn}`` added to the registry for this dataset).

    Errors: ``on_error`` (``"raise"``, ``"skip"`` or ``"warn"``), ``keep_length`` (a skipped sample is
    stood in for by repeating the next, so every rank keeps ``len(ds)``).

    Place: ``rank`` and ``world_size`` (None: from torch.distributed, else ``RANK``/``WORLD_SIZE``, else
    0 and 1).

    Reading: ``http`` (``HttpOptions``: timeouts, retries, headers, TLS), ``object_store``
    (``ObjectStoreOptions``: s3:// read natively, part size, parts in flight, retries), ``cache_dir`` and
    ``cache_size`` (a local cache of remote shards, LRU under the size), ``prefetch`` (shards read ahead
    per worker; None: 2 for remote shards, 0 for local ones), ``prefetch_bytes`` (bytes fetched ahead of
    each), ``zero_copy`` (members as read-only memoryviews into mapped local shards; needs ``decode=False``),
    ``defer_reads`` (behind a shuffle buffer, hold ids and read a local shard's sample as it leaves; None:
    for shards whose samples average at least 16 KiB, where that is faster; True: always, and remote
    shards too (s3://, HTTP), each read with its buffered neighbours in one ranged GET of at most 8 MiB,
    at most 32 MiB held: ``chain/coalesce.py``; False: never).

    Token budgets (``streamer/budget/``; the index needs a cost column: ``pack --cost FIELD``):
    ``batch_tokens`` (None: samples one by one; N: each item is a list of samples whose costs fit N, each
    with its ``__cost__``, and every rank and worker yields the same number of them), ``batching``
    (``"pack"``: costs sum to at most N; ``"pad"``: count x largest at most N), ``batch_window`` (samples
    the batcher chooses among; None: 64 to pack, 1,024 to pad), ``overlong`` (a sample over N: ``"skip"``,
    ``"truncate"`` (its ``__cost__`` is N: cut it to that) or ``"error"``).

    Choosing samples (``streamer/placement/subsets.py``; no shard rewritten): ``source`` may be a subset
    index (``shardstream subset``'s folder), or ``include``/``exclude`` (keys: a text file one a line, a
    Parquet file, or a Python set; resolved through the index's key file) and ``where`` (an expression over
    the per-sample columns, ``"cost < 4096"``, or a function of them returning one bool a sample) choose
    here. Plans then deal the kept samples only: equal counts on every rank still, and a left-out
    sample's bytes are never read. ``skip_steps`` (``[(start, end), ...]``, global steps, end exclusive,
    counted from the first epoch's start) leaves those steps' batches out on every rank alike, found from
    the plan; ``batch_size`` (the DataLoader's; not with ``batch_tokens``) says what a step holds.

    Monitoring (``streamer/stats/``): ``monitor`` (``MonitorOptions(interval=, watchdog=)``; None or
    True: statistics on, watchdog off; False: off): ``ds.stats()`` then says where the time went.
    """

    def __init__(
        self,
        source: str | os.PathLike[str] | Sequence[str],
        *,
        shuffle: bool = True,
        seed: int = 0,
        buffer_size: int = 1000,
        initial: int | None = None,
        remainder: str = "drop",
        resampled: bool = False,
        fields: Sequence[str] | Mapping[str, str | Sequence[str]] | None = None,
        decode: bool | Callable[[dict[str, Any]], Any] = True,
        image: str = "pil",
        image_size: int | tuple[int, int] | None = None,
        audio_rate: int | None = None,
        audio_mono: bool = False,
        video_frames: int | None = None,
        video: Any = None,
        audio: Any = None,
        decoders: Mapping[str, Callable[[bytes], Any]] | None = None,
        on_error: str = "raise",
        keep_length: bool = True,
        rank: int | None = None,
        world_size: int | None = None,
        http: HttpOptions | None = None,
        object_store: ObjectStoreOptions | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_size: int | str | None = None,
        prefetch: int | None = None,
        prefetch_bytes: int = 16 << 20,
        zero_copy: bool = False,
        defer_reads: bool | None = None,
        batch_tokens: int | None = None,
        batching: str = "pack",
        batch_window: int | None = None,
        overlong: str = "skip",
        monitor: MonitorOptions | bool | None = None,
        include: Any = None,
        exclude: Any = None,
        where: Any = None,
        skip_steps: Any = None,
        batch_size: int | None = None,
    ) -> None:
        super().__init__()
        self.monitor = MonitorOptions.of(monitor)
        self.error_handling = Errors(on_error=on_error, keep_length=keep_length)
        self.placement = Placement.of(shuffle, seed, remainder, resampled, rank, world_size)
        # Headers go to the source's own origins only.
        opening = OpenOptions.of(bind(http, source), cache_dir, cache_size, object_store)
        self.shards = ShardList.from_source(source, opening)
        select(self.shards, source, opening, include, exclude, where)  # planned on what is kept, if asked
        if zero_copy and decode is not False:
            raise ValueError("zero_copy=True hands out raw read-only buffers: pass decode=False with it")
        self.reading = Reading(
            open=opening,
            fields=fields,  # parsed to a Fields there: the dict form, alternatives, checked names
            buffer_size=buffer_size,
            initial=initial,
            prefetch=default_prefetch([self.shards.urls[0]], readers=1) if prefetch is None else prefetch,
            prefetch_bytes=prefetch_bytes,
            zero_copy=zero_copy,
            defer_reads=defer_reads,
        )
        self.decoder = make_decoder(
            decode,
            image=image,
            image_size=image_size,
            audio_rate=audio_rate,
            audio_mono=audio_mono,
            video_frames=video_frames,
            video=video,
            audio=audio,
            decoders=decoders,
            fields=self.reading.fields,
        )
        self._plan: Plan | None = None  # what the chain reads when an elastic restore dealt it
        self._digest: str | None = None
        self._restored: SlotPlan | None = None  # a budget's slot of an elastic restore, until it is read
        self.budget = budget_of(
            self.shards, self.placement, opening, batch_tokens, batching, batch_window, overlong
        )
        self.skips, self.batch_size = check_skipping(skip_steps, batch_size, self.shards, self.budget)

    # -- counts ----------------------------------------------------------------------------------------
    def __len__(self) -> int:
        """Samples this rank yields per epoch (needs the index's counts)."""
        total = self.shards.total
        if self.budget is not None:
            raise TypeError(
                "with batch_tokens the batches per rank depend on num_workers: ds.steps(num_workers)"
            )
        if total is None or self.placement.resampled:
            raise TypeError("len() needs per-shard counts (pass the packer's index) and resampled=False")
        return rank_quota(total, self.placement.resolve()[1], self.placement.remainder)

    def steps(self, workers: int) -> int:
        """With ``batch_tokens``: the batches this rank yields this epoch through a DataLoader of
        ``workers`` workers (0: none), the same on every rank (reads the columns of a few shards)."""
        if self.budget is None:
            raise TypeError("steps() counts budgeted batches: this dataset has no batch_tokens (use len())")
        return budget_steps(self, workers)

    # -- iteration -------------------------------------------------------------------------------------
    def _assemble(self, place: Place, epoch: int) -> Node:
        return self._build(place, epoch, self._plan, reads=True)

    def _build(self, place: Place, epoch: int, plan: Plan | None, *, reads: bool) -> Node:
        """This place's chain (``shardchain.py``); ``plan``: an elastic restore's deal (None: the place's
        own segments); ``reads`` False: none of it reads, for checking a saved state."""
        slot = None
        if self.budget is not None:
            slot = budget_plan(self, place, epoch) if plan is None else self._budget_resumed(plan, epoch)
        return build_shard_chain(self, place, epoch, plan, slot, reads=reads, counters=self._shared)
