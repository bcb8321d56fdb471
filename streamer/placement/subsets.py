"""A subset index opened: its dataset's index and masks found and checked, before any plan is made on them."""

from __future__ import annotations

import bisect
import hashlib
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from shardstream.errors import FormatError, redact_url
from shardstream.format.subsetindex import SubsetIndex
from shardstream.format.subsetmasks import SubsetMasks, encode_masks
from shardstream.io.openers import OpenOptions, read_small
from shardstream.io.urls import join_url
from shardstream.subset import SubsetOptions, subset_masks

KEPT_SHARDS = 16  # a subset's shards whose kept sample numbers are kept unpacked
AGAIN = "make the subset again with `shardstream subset`"


@dataclass(frozen=True, kw_only=True)
class OpenedSubset:
    """``dataset``: the URL of the index the subset was made of; ``masks``: its masks file's bytes,
    checked against the subset index's size and sha256; ``masks_source``: their URL as errors show it."""

    dataset: str
    masks: bytes
    masks_source: str


def read_subset(url: str, options: OpenOptions | None) -> OpenedSubset:
    """The subset index at ``url``, its dataset and masks; FormatError naming the file and the fix when
    one is missing, the dataset was packed or indexed again since (its masks would name other samples),
    or the masks file is not the one the subset was made with."""
    shown = redact_url(url)
    data = read_small(url, options)
    if data is None:
        raise FormatError(f"{shown}: subset index not found")
    subset = SubsetIndex.from_json(data.decode("utf-8", "replace"), source=shown)
    dataset = join_url(url, subset.dataset)
    index = read_small(dataset, options)
    if index is None:
        raise FormatError(f"{shown}: its dataset's index {redact_url(dataset)} is not there (moved?)")
    if hashlib.sha256(index).hexdigest() != subset.dataset_sha256:
        raise FormatError(
            f"{shown}: its dataset's index {redact_url(dataset)} changed since the subset was made (packed "
            f"or indexed again): {AGAIN}"
        )
    masks_url = join_url(url, subset.masks)
    masks = read_small(masks_url, options)
    whole = masks is not None and len(masks) == subset.masks_bytes
    if masks is None or not whole or hashlib.sha256(masks).hexdigest() != subset.masks_sha256:
        raise FormatError(
            f"{redact_url(masks_url)}: missing, or not the masks its subset index was made with: {AGAIN}"
        )
    return OpenedSubset(dataset=dataset, masks=masks, masks_source=redact_url(masks_url))


class KeptIndices:
    """``kept(shard)``: a subset's shard's kept sample numbers, ascending (None: kept whole), unpacked
    from ``masks`` for the last few shards asked for (a shuffle mixes a handful at a time)."""

    def __init__(self, masks: SubsetMasks) -> None:
        self.masks = masks
        self._unpacked: dict[int, np.ndarray | None] = {}

    def __call__(self, shard: int) -> np.ndarray | None:
        # The read-ahead thread asks too: each step is one dict operation, and the answer a local.
        found = self._unpacked.get(shard, self)
        if found is self:
            found = self.masks.indices(shard)
            if len(self._unpacked) >= KEPT_SHARDS:
                self._unpacked.clear()
            self._unpacked[shard] = found
        return found  # type: ignore[return-value]


def select(shards: Any, source: Any, opening: OpenOptions, include: Any, exclude: Any, where: Any) -> None:
    """``ShardDataset(include=, exclude=, where=)``: the samples those rules keep (``shardstream.subset``,
    the key file walked once, the cost columns read per shard) become ``shards``'s plan, as a subset
    index's masks would; nothing when no rule is given. ValueError naming the argument."""
    if include is None and exclude is None and where is None:
        return
    if shards.kept is not None:
        raise ValueError(
            "include/exclude/where: the source is already a subset; make one subset with every rule "
            "(shardstream subset ... --include/--exclude/--where)"
        )
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError("include/exclude/where need the dataset's folder or index, not a pattern or a list")
    chosen = subset_masks(
        source, SubsetOptions(include=include, exclude=exclude, where=where), open_options=opening
    )
    if chosen.kept == 0:
        raise ValueError(
            f"include/exclude/where keep none of the {chosen.samples} samples of {shards.source}: "
            f"check the rules ({', '.join(f'{k}: {v} left out' for k, v in chosen.left_out.items())})"
        )
    data = encode_masks(chosen.counts, chosen.masks)
    shards.apply_masks(SubsetMasks(data, shards.counts, source=f"{shards.source} (include/exclude/where)"))
    shards.source = f"{shards.source} ({chosen.kept} of {chosen.samples} samples chosen)"


class JoinedKept:
    """``KeptIndices`` of shard lists laid end to end (a mixture's): ``parts`` are (first shard, the
    list's ``kept`` or None), ascending by first shard."""

    def __init__(self, parts: list[tuple[int, KeptIndices | None]]) -> None:
        self.firsts = [first for first, _ in parts]
        self.parts = [kept for _, kept in parts]

    def __call__(self, shard: int) -> np.ndarray | None:
        part = bisect.bisect_right(self.firsts, shard) - 1
        kept = self.parts[part]
        return None if kept is None else kept(shard - self.firsts[part])
