"""Mixture: many counted datasets read as one, in planned proportions — exact at every prefix, resumable.

Each source is a dataset we can read with counts (the packer's index: a folder, a path or a URL) with a
``weight``, ``repeat`` or ``samples`` (``plan.py``); every sample carries ``__source__``. A worker's
stream is the plan's interleave over its per-source budgets (``reader.py``); each source moves along
its own pass stream (``passes.py``) from epoch to epoch, so a source read less than once an epoch carries
on where it stopped, and one read more often is read in whole passes. Trade-off: one plan for everyone
means the rank's length is fixed by the epoch size, not by the sources' sizes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from shardstream.io.httpoptions import HttpOptions, bind
from shardstream.io.objstoreoptions import ObjectStoreOptions
from shardstream.io.openers import OpenOptions

from ..budget.setup import budget_options_of
from ..chain.node import Node
from ..chain.skips import check_skipping
from ..datasets.base import StreamBase
from ..datasets.options import Errors, Placement, Reading, default_prefetch
from ..datasets.saved import check_chain_state
from ..stats.options import MonitorOptions
from .budget import MixtureBudget, budget_deal, check_budgeted, mixture_steps, token_shares
from .carry import Position
from .chain import build_chain
from .config import load_mixture
from .plan import MixturePlan
from .rest import Restored, by_weights, place_deal, saved_shape, scheduled_after
from .restore import elastic_pending
from .resume import FINISHED, Place, restore_point, resume_point
from .saving import mixture_state
from .scheduled import weight_schedules
from .shape import MixtureShape
from .source import (
    MixSource,
    all_shards,
    check_options,
    counted_shards,
    read_sources,
    source_decoder,
)


class Mixture(StreamBase):
    """Samples of several datasets in planned proportions; see the module docstring.

    ``sources``: MixSource objects or mappings (``{"path": "data/coco", "weight": 0.5, "image_size": 224}``;
    each with its own ``fields`` and decode options, see ``MixSource``). ``epoch_size``: samples per epoch
    over all ranks (None: what the shares give, e.g. one pass of the sources read by ``repeat``).
    ``shuffle``, ``seed``, ``remainder``, ``on_error``, ``keep_length``, ``rank``, ``world_size``,
    ``http``, ``object_store``, ``cache_dir``, ``cache_size``, ``prefetch`` (None: 1 if any source is
    remote, else 0) and ``prefetch_bytes`` are ShardDataset's and apply to all sources. ``buffer_size``:
    shared by the sources in proportion to their budgets (at least one sample each); each source shuffles
    its window of it.
    ``max_open``: sources with an open reader at once per worker (the least recently used is closed).
    ``defer_reads``: ShardDataset's; a source's window then holds large samples' ids, read as they leave.
    ``stratify``: the DataLoader's batch size B; every batch then holds floor or ceil of each source's
    share (None: the plain order, within one sample of each share at every prefix).

    ``batch_size``: the DataLoader's; needed when a source's ``weight`` is a schedule (``{"stages":
    [[step, weight], ...]}`` or ``{"ramp": ...}``): the weights then change at global steps, every
    worker's prefix within one sample of the schedule's running share (``schedule.py``).
    ``skip_steps``: ShardDataset's (global steps whose batches every rank leaves out; needs
    ``batch_size``, or ``batch_tokens``); an epoch dealt after a change or an elastic restore is read whole.

    ``monitor`` is ShardDataset's (statistics, the watchdog: ``ds.stats()``).

    Token budgets (every source's index needs a cost column, ``pack --cost FIELD``; ``budget.py``):
    ``batch_tokens``, ``batching``, ``batch_window`` and ``overlong`` are ShardDataset's: each item is then
    a batch (a list of samples) within the budget, the same number on every rank and worker
    (``steps(num_workers)``); each source's epoch run is dealt to the workers by cost. ``weight_by``:
    ``"samples"`` (a weight is a share of the epoch's samples) or ``"tokens"`` (a share of its cost: a
    weight is divided by the source's mean cost per sample).
    """

    def __init__(
        self,
        sources: Sequence[MixSource | Mapping[str, Any]],
        *,
        epoch_size: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        buffer_size: int = 1000,
        remainder: str = "drop",
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
        max_open: int = 32,
        stratify: int | None = None,
        defer_reads: bool | None = None,
        batch_tokens: int | None = None,
        batching: str = "pack",
        batch_window: int | None = None,
        overlong: str = "skip",
        weight_by: str = "samples",
        batch_size: int | None = None,
        skip_steps: Any = None,
        monitor: MonitorOptions | bool | None = None,
    ) -> None:
        super().__init__()
        self.monitor = MonitorOptions.of(monitor)
        check_options(sources, max_open=max_open, stratify=stratify)
        budget_options = budget_options_of(batch_tokens, batching, batch_window, overlong)
        check_budgeted(budget_options, stratify=stratify, weight_by=weight_by)
        self.sources = read_sources([MixSource.of(s, i) for i, s in enumerate(sources)])  # weight 0: not read
        self.placement = Placement(
            shuffle=shuffle, seed=seed, remainder=remainder, rank=rank, world_size=world_size
        )
        self.error_handling = Errors(on_error=on_error, keep_length=keep_length)
        self.epoch_size, self.max_open, self.stratify = epoch_size, max_open, stratify
        # Headers go to the sources' own origins, never to hosts their indexes name.
        paths = [s.path for s in self.sources]
        opening = OpenOptions.of(bind(http, paths), cache_dir, cache_size, object_store)
        self.shard_lists = [counted_shards(s, opening) for s in self.sources]
        self.shards, self.bases = all_shards(self.shard_lists)
        self.budget = (
            MixtureBudget(budget_options, self.shard_lists, self.bases, opening) if budget_options else None
        )
        self.shares = token_shares(self.sources, self.shard_lists, weight_by, self.budget)
        schedules = weight_schedules(
            self.sources,
            batch_size=batch_size,
            stratify=stratify,
            budgeted=self.budget is not None,
            weight_by=weight_by,
        )
        self.skips, self.batch_size = check_skipping(skip_steps, batch_size, self.shard_lists[0], self.budget)
        self.names = [share.name for share in self.shares]
        self.decoders = [source_decoder(s) for s in self.sources]
        if prefetch is None:
            prefetch = default_prefetch([s.urls[0] for s in self.shard_lists], readers=len(self.sources))
        # Fields are per source (each opener's own); the buffer and read-ahead are checked as ShardDataset's.
        self.reading = Reading(
            open=opening,
            buffer_size=buffer_size,
            prefetch=prefetch,
            prefetch_bytes=prefetch_bytes,
            defer_reads=defer_reads,
        )
        self.shape = MixtureShape(
            self.shares,
            self.shard_lists,
            self.bases,
            placement=self.placement,
            epoch_size=epoch_size,
            buffer_size=self.reading.buffer_size,
            extra=self.budget.identity() if self.budget is not None else "",
            schedules=schedules,
            per_batch=batch_size,
        )
        self.shape.epoch_plan(self.placement.resolve()[1], 1, 0)  # every error in the sources shows now
        self._origins: dict[str, tuple[int, Position]] = {}  # name -> (epoch, where its stream stood then)
        self._ended_epoch: int | None = None  # an epoch a loaded DataLoader state said was over
        self._restored: Restored | None = None  # what the chain reads when an elastic restore dealt it
        self._scheduled_restore: dict[str, Any] | None = None  # its pending, whose end needs the topology
        self._restore_ends: dict[tuple[int, int], Any] = {}  # scheduled_after's, by (world, workers)

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str], **overrides: Any) -> Mixture:
        """A mixture from a YAML file (``configs/mixture-example.yaml``); keywords override its options."""
        sources, options = load_mixture(path)
        try:
            return cls(sources, **{**options, **overrides})
        except ValueError as exc:
            raise ValueError(f"{os.fspath(path)}: {exc}") from exc

    # -- the plan --------------------------------------------------------------------------------------
    def plan(self, world: int, workers: int) -> MixturePlan:
        """The epoch's plan for this topology, made once: state_dict asks for it at every batch."""
        return self.shape.plan(world, workers)

    def positions(self, epoch: int, plan: MixturePlan) -> list[Position]:
        """Where each source's stream stands at this epoch's start: its carry (``carry.py``), its start."""
        origins, restore, key = self._origins, self._scheduled_restore, (plan.world, plan.workers)
        if restore is not None and epoch > int(restore["epoch"]):
            # where a restore dealt by weights left the sources: once per topology (asked at every save)
            if key not in self._restore_ends:
                self._restore_ends[key] = scheduled_after(self.shape, restore, *key)
            origins = self._restore_ends[key]
        out = []
        for j, name in enumerate(self.names):
            first_epoch, at = origins.get(name, (0, Position((), 0)))
            out.append(at.advance(self.shape.moved(plan.world, plan.workers, first_epoch, epoch)[j]))
        return out

    # -- counts ----------------------------------------------------------------------------------------
    def __len__(self) -> int:
        """Samples this rank yields per epoch: the same on every rank, whatever the worker count."""
        if self.budget is not None:
            raise TypeError(
                "with batch_tokens the batches per rank depend on num_workers: mix.steps(num_workers)"
            )
        return self.plan(self.placement.resolve()[1], 1).rank_length

    def steps(self, workers: int) -> int:
        """With ``batch_tokens``: the batches this rank yields this epoch through a DataLoader of
        ``workers`` workers (0: none), the same on every rank."""
        if self.budget is None:
            raise TypeError("steps() counts budgeted batches: this mixture has no batch_tokens (use len())")
        return mixture_steps(self, workers)

    # -- resumption ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Where this mixture stands, as plain data.

        Schema: ``epoch``; ``place`` (``[rank, world, worker, workers]``, or None before a chain started);
        ``node`` (the chain's state: stand-ins ``{"owed", "last"}`` and the decoding ``Mapper`` each with
        the inner state under ``"source"``, the reader ``{"counts": [per source handed out],
        "batch_start"?}``); ``left`` (samples of this worker's plan not yet reached); ``sources``
        (``{name: [start, per_epoch]}``: where each source's pass stream stood at the epoch's start and
        how far an epoch moves it); ``carry`` (``{name: [[a, b], ...]}``: spans of a source's pass stream
        read before its start, left by a change mid-epoch; ``{}``: none); ``plan`` (in a dealt epoch:
        ``{"budgets", "spans", "by"}``, this place's deal, ``by`` one of elastic, carry, rest, budget);
        ``rest`` (after a change mid-epoch: ``{"lengths", "step", "world"}``, each worker's samples left
        at the change and its global step); ``weights`` (the shares and schedules the plan was made
        under, which a changed mixture rebuilds it from); and the identity: ``dataset`` (a digest of the
        sources, shares, epoch and buffer size), ``seed``, ``shuffle``, ``remainder``. Loaded but not yet
        read, the loaded state comes back (an elastic one with ``elastic``: each source's leftover, and
        for a schedule ``step``, the global step of the checkpoint).
        """
        return mixture_state(self, loaded=self._pending, chain=self._chain, restored=self._restored)

    def identity(self) -> dict[str, Any]:
        """What a state must share with this mixture to load: data, shares, epoch and buffer size, seed."""
        return self.shape.identity()

    def load_state_dict(self, state: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        """Continue, on the next iteration, where the run that saved ``state`` stood.

        ``state``: this rank's own state (or its DataLoader's), to continue exactly on the same world size
        and workers; or into a changed mixture: at an epoch boundary any change (``resume.py``), in the
        middle of an epoch changed weights or schedules, taken at the next step on every rank alike
        (``rest.py``: give it the loader's state, and read the rest through a new loader); or the list of
        every old rank's states, in rank order, to continue the epoch on any world size and workers, each
        source's samples still once (``restore.py``), under changed weights too. Checked here, before any
        sample is read.
        """
        if isinstance(state, Sequence):
            if self.budget is not None:
                raise ValueError(
                    "a Mixture with batch_tokens resumes on the same world size and workers only: load "
                    "this rank's own state (an elastic restore of a budgeted mixture is not supported yet)"
                )
            under = saved_shape(self.shape, state)  # other weights: a change taken with the restore
            per_batch = self.shape.per_batch if self.shape.schedules is not None else None
            self._pending, self._origins = elastic_pending(
                under, state, per_batch=per_batch, changed=under is not self.shape
            )
            self._scheduled_restore, self._restore_ends = by_weights(self.shape, self._pending), {}
            return
        world = self.placement.resolve()[1]
        loaded = restore_point(self.shape, state, world=world, ended_epoch=self._ended_epoch)  # checks it
        before = self._origins
        self._origins = loaded.origins  # where the saved chain's runs start
        try:  # the chain its place and epoch build checks the state of the saved one (each node its own keys)
            if loaded.pending and loaded.pending.get("node") and loaded.pending["node"] != FINISHED:
                place: Place = tuple(int(v) for v in loaded.pending["place"])  # type: ignore[assignment]
                epoch, node, restored = resume_point(self.shape, loaded.pending, place, self.epoch)
                check_chain_state(self._build(place, epoch, restored, reads=False), node, self.shards)
        except ValueError:
            self._origins = before
            raise
        self._pending, self._ended_epoch = loaded.pending, loaded.ended_epoch
        self._scheduled_restore, self._restore_ends = by_weights(self.shape, loaded.pending), {}

    # -- iteration -------------------------------------------------------------------------------------
    def _source_names(self) -> Sequence[str]:
        return self.names

    def _start(self, pending: dict[str, Any] | None, place: Place) -> tuple[int, Any] | None:
        epoch, node_state, self._restored = resume_point(self.shape, pending, place, self.epoch)
        if node_state == FINISHED:  # a changed mixture loaded after its epoch's end: nothing left of it
            return None
        if self.budget is not None:  # the cost deal, read as a restore's spans (a resumed state saved it)
            self._restored = budget_deal(self, place, epoch)[0]
        elif self._restored is None:  # a source carries a changed epoch's unread part: dealt as spans
            at = self.positions(epoch, self.shape.epoch_plan(place[1], place[3], epoch))
            if any(p.carry for p in at):
                self._restored = place_deal(self.shape, epoch, dict(zip(self.names, at, strict=True)), place)
        return epoch, node_state

    def _assemble(self, place: Place, epoch: int) -> Node:
        return self._build(place, epoch, self._restored, reads=True)

    def _build(self, place: Place, epoch: int, restored: Restored | None, *, reads: bool) -> Node:
        """The worker's chain (``chain.py``); ``reads`` False: none of it reads, for checking a state."""
        return build_chain(self, place, epoch, restored, reads=reads, counters=self._shared)
