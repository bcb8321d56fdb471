"""One source of a mixture: where it is, how much of it an epoch reads, how its samples decode.

Given as a ``MixSource`` or a mapping (one YAML entry); every key is checked, so a typo fails with the
source and the key named. A source must have counts (the packer's index): the plan is made from them.
"""

from __future__ import annotations

import bisect
import hashlib
import numbers
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from shardstream.errors import FormatError, redact_url
from shardstream.io.openers import OpenOptions
from shardstream.userwarn import warn_user

from ..chain.opener import ShardOpener
from ..datasets.options import Reading
from ..decode.fields import Fields
from ..decode.make import for_epoch, make_decoder
from ..placement.shards import Concat, ShardList
from ..placement.subsets import JoinedKept
from .plan import KINDS, Share
from .schedule import Schedule

DECODE_KEYS = (
    "image",
    "image_size",
    "audio_rate",
    "audio_mono",
    "video_frames",
    "decoders",
    "video",
    "audio",
)


@dataclass(frozen=True)
class MixSource:
    """One source of a mixture: where it is, how much of it an epoch reads, how its samples decode.

    ``path``: the packer's index (its path, folder or URL; it must have counts). ``name``: what errors and
    the samples' ``__source__`` call it (None: the folder's name). Exactly one of ``weight`` (what the
    ``repeat`` and ``samples`` sources leave of the epoch is shared in proportion to the weights; ``0``
    leaves the source out of this run, unopened, with a warning; a schedule, ``{"stages": [[step, weight],
    ...]}`` or ``{"ramp": [...]}``, makes it a function of the global step: ``Mixture(batch_size=...)``
    then says what a step is), ``repeat`` (passes over the source per
    epoch, fractions allowed) or ``samples`` (samples per epoch).
    ``fields``, ``decode``, ``image``, ``image_size``, ``audio_rate``, ``audio_mono``, ``video_frames``,
    ``decoders``, ``video`` and ``audio`` (clips and windows: ``{"clip_seconds": 4, "fps": 2}``) are
    ShardDataset's, for this source's samples alone (``fields`` as a list or a mapping of names to
    alternatives, ``{"image": "jpg;png", "meta": "json"}``, in YAML too); clips and windows fall where
    (the mixture's seed, epoch, key) puts them.
    """

    path: str | os.PathLike[str]
    name: str | None = None
    weight: float | Mapping[str, Any] | Schedule | None = None
    repeat: float | None = None
    samples: int | None = None
    fields: Sequence[str] | Mapping[str, str | Sequence[str]] | None = None
    decode: Any = True
    image: str = "pil"
    image_size: int | tuple[int, int] | None = None
    audio_rate: int | None = None
    audio_mono: bool = False
    video_frames: int | None = None
    decoders: Mapping[str, Any] | None = None
    video: Mapping[str, Any] | None = None
    audio: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, spec: MixSource | Mapping[str, Any], position: int) -> MixSource:
        """A MixSource from itself or a mapping (one YAML entry); unknown keys are named, with the known."""
        if isinstance(spec, MixSource):
            return spec
        if not isinstance(spec, Mapping):
            raise ValueError(f"source {position}: expected a mapping with a path and a weight, not {spec!r}")
        known = [f.name for f in fields(cls)]
        label = f"source {position} ({spec.get('name') or spec.get('path')!r})"
        for key in spec:
            if key not in known:
                raise ValueError(f"{label}: unknown key {key!r}; a source takes {', '.join(known)}")
        if "path" not in spec:
            raise ValueError(f"{label}: no 'path' (the dataset's index, folder or URL)")
        return cls(**spec)

    def label(self) -> str:
        if self.name is not None:
            return str(self.name)
        text = redact_url(os.fspath(self.path)).rstrip("/")  # https://user:pw@host/index.json: "host"
        if text.endswith(".json"):
            text = os.path.dirname(text)
        return os.path.basename(text) or text

    def amount(self) -> tuple[str, Any]:
        """(kind, value) of the one of weight, repeat or samples given; else ValueError naming the source."""
        given = [(kind, getattr(self, kind)) for kind in KINDS if getattr(self, kind) is not None]
        if len(given) != 1:
            raise ValueError(
                f"source {self.label()!r}: give exactly one of weight, repeat or samples, "
                f"not {dict(given) or 'none'}"
            )
        return given[0]

    def left_out(self) -> bool:
        """Whether ``weight`` is 0: the source is off for this run (an ablation), not an error."""
        kind, value = self.amount()
        return (
            kind == "weight"
            and isinstance(value, numbers.Real)
            and not isinstance(value, bool)
            and value == 0
        )

    def share(self, size: int) -> Share:
        kind, value = self.amount()
        if kind == "weight" and not isinstance(value, numbers.Real):  # a schedule: its shares are its own
            return Share(self.label(), size, kind, 1.0)
        return Share(self.label(), size, kind, value)

    def schedule(self) -> Schedule | None:
        """The weight over global steps when ``weight`` is a schedule (``{"stages": [[step, weight], ...]}``
        or ``{"ramp": ...}``, see ``schedule.py``); None for a number, ``repeat`` or ``samples``."""
        kind, value = self.amount()
        if kind != "weight" or isinstance(value, numbers.Real):
            return None
        return Schedule.of(value, f"source {self.label()!r}: weight")


def read_sources(sources: Sequence[MixSource]) -> list[MixSource]:
    """The sources this run reads: those at ``weight`` 0 are dropped before anything opens their path, so
    the mixture is the one without them (plan, samples, state), and a warning names each at the caller's
    line. Their keys are checked as far as that reads nothing; ValueError when every source is left out."""
    off = [source for source in sources if source.left_out()]
    for source in off:
        source_decoder(source)  # its fields and decode options, checked as a read source's are
    kept = [source for source in sources if not source.left_out()]
    if not kept:
        names = ", ".join(repr(source.label()) for source in off)
        raise ValueError(
            f"every source has weight 0 ({names}), so none is left to read; give at least one a weight > 0"
        )
    for source in off:
        warn_user(
            f"source {source.label()!r} has weight 0: left out of this run "
            "(remove it, or give it a weight > 0 to read it)"
        )
    return kept


def counted_shards(source: MixSource, opening: OpenOptions) -> ShardList:
    text = os.fspath(source.path)
    try:  # a local path that is not there is refused here, by ShardList's one rule, with the fix
        shards = ShardList.from_source(text, opening)
    except FormatError as exc:
        raise ValueError(f"source {source.label()!r}: {exc}") from exc
    if shards.counts is None:
        raise ValueError(
            f"source {source.label()!r}: {text} has no per-shard sample counts, which a mixture "
            "plans from; point it at the packer's index, or run `shardstream index` over the "
            "shards first"
        )
    if shards.total == 0:
        raise ValueError(f"source {source.label()!r}: {text} has no samples")
    return shards


def source_fields(source: MixSource) -> Fields | None:
    """The source's ``fields``, parsed; a bad one is a ValueError naming the source."""
    try:
        return Fields.of(source.fields)
    except ValueError as exc:
        raise ValueError(f"source {source.label()!r}: {exc}") from exc


def source_decoder(source: MixSource) -> Any:
    """The source's decode function, made as ShardDataset makes its own; errors name the source."""
    options = {key: getattr(source, key) for key in DECODE_KEYS}
    try:
        return make_decoder(source.decode, fields=source_fields(source), **options)
    except ValueError as exc:
        raise ValueError(f"source {source.label()!r}: {exc}") from exc


def source_opener(shards: ShardList, reading: Reading, source: MixSource) -> ShardOpener:
    """The source's opener over the mixture's shard list: its own fields and sidecar cache."""
    fields = source_fields(source)
    return ShardOpener(
        shards, reading.open, fields=fields, prefetch=reading.prefetch, prefetch_bytes=reading.prefetch_bytes
    )


class SampleOffsets:
    """Where sample ``index`` of ``shard`` begins, asked of the source whose shards hold it (what a
    mixture's Recovery names in its errors); None without a sidecar."""

    def __init__(self, openers: Sequence[ShardOpener], bases: Sequence[int]) -> None:
        self.openers, self.bases = list(openers), list(bases)

    def __call__(self, shard: int, index: int) -> int | None:
        return self.openers[source_of(self.bases, shard)].sample_offset(shard, index)


class SourceDecoders:
    """Each sample decoded by its own source's decode function (``__source__`` names the source); samples
    of a source that does not decode pass as they are. What a Mixture's ``Mapper`` applies."""

    def __init__(self, names: Sequence[str], decoders: Sequence[Any]) -> None:
        self.by_name = {name: fn for name, fn in zip(names, decoders, strict=True) if fn is not None}

    def set_epoch(self, seed: int, epoch: int) -> None:
        """Every source's clips and windows from now on fall where (seed, epoch, key) puts them."""
        for decode in self.by_name.values():
            for_epoch(decode, seed, epoch)

    def __call__(self, sample: dict[str, Any]) -> Any:
        decode = self.by_name.get(sample["__source__"])
        return sample if decode is None else decode(sample)


def source_of(bases: Sequence[int], shard: int) -> int:
    """Which source holds ``shard`` of the mixture's shard list (``bases``: where each source's begin)."""
    return bisect.bisect_right(bases, shard) - 1


def all_shards(lists: Sequence[ShardList]) -> tuple[ShardList, list[int]]:
    """Every source's shards as one list (so a sample's id names its shard across the mixture), and where
    each source's shards begin in it."""
    bases = [0]
    for shards in lists:
        bases.append(bases[-1] + len(shards))
    counts = np.concatenate([shards.counts for shards in lists])  # type: ignore[misc]
    digests = sizes = None
    if all(shards.digests is not None for shards in lists):
        digests = np.concatenate([shards.digests for shards in lists])  # type: ignore[misc]
    if all(shards.sizes is not None for shards in lists):
        sizes = np.concatenate([shards.sizes for shards in lists])  # type: ignore[misc]
    joined = Concat([shards.urls for shards in lists])
    # Each source's sidecars where its index keeps them (beside the shards, or the folder of index --out).
    sidecars = Concat([_OffsetsUrls(shards) for shards in lists])
    label = f"a mixture of {len(lists)} sources"
    mixed = ShardList(joined, counts, label, digests, sidecars, sizes=sizes)
    if any(shards.kept is not None for shards in lists):  # a source is a subset: plans count its kept samples
        mixed.shard_counts = np.concatenate([shards.shard_counts for shards in lists])  # type: ignore[misc]
        mixed.kept = JoinedKept([(base, shards.kept) for base, shards in zip(bases, lists, strict=False)])
    versions = [shards.metadata_version for shards in lists]
    if all(versions):  # the node's metadata cache, keyed by every source's index (one changed: new keys)
        mixed.metadata_version = hashlib.sha256(" ".join(versions).encode()).hexdigest()  # type: ignore[arg-type]
    return mixed, bases[:-1]


class _OffsetsUrls(Sequence[str]):
    """One shard list's offsets sidecar URLs, computed on demand as it gives them."""

    def __init__(self, shards: ShardList) -> None:
        self.shards = shards

    def __len__(self) -> int:
        return len(self.shards)

    def __getitem__(self, i: int) -> str:  # type: ignore[override]
        return self.shards.offsets_url(i)


def check_options(sources: Any, *, max_open: int, stratify: int | None) -> None:
    """ValueError naming the argument, for the sources list and the options only a Mixture has."""
    if isinstance(sources, (str, os.PathLike, Mapping)) or not sources:
        raise ValueError("sources must be a non-empty list of sources (path plus weight, repeat or samples)")
    if max_open < 1:
        raise ValueError(f"max_open must be >= 1, not {max_open}")
    if stratify is not None and (isinstance(stratify, bool) or not isinstance(stratify, int) or stratify < 1):
        raise ValueError(f"stratify must be the DataLoader's batch size (an int >= 1), not {stratify!r}")
