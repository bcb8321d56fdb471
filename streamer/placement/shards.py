"""The shard list: URLs computed on demand from a brace pattern, a list, or the packer's index.

A pattern costs O(1) memory at any size, and two stats when local (its first and last shards, checked
when made, so a pattern wider than the shards on disk fails at once, not mid-epoch in a worker); an
index keeps per-shard counts as one int64 array (for a version-2 index, a view of its columns file's
bytes: no per-shard object is ever made).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence

import numpy as np

from shardstream.errors import FormatError, redact_url
from shardstream.format import INDEX_NAME, BracePattern, DatasetIndex, ShardColumns, offsets_name
from shardstream.format.samplecols import COST, sample_columns_name
from shardstream.format.sidecars import offsets_sidecar, sample_columns_sidecar
from shardstream.format.subsetindex import SUBSET_NAME
from shardstream.format.subsetmasks import SubsetMasks
from shardstream.format.tails import tail_array
from shardstream.io.openers import OpenOptions, read_small
from shardstream.io.urls import join_url, local_path, scheme_of

from .subsets import JoinedKept, KeptIndices, read_subset


class Concat(Sequence[str]):
    """Several patterns end to end, still without expanding any of them."""

    def __init__(self, parts: list[Sequence[str]]) -> None:
        self.parts = parts
        self.ends = np.cumsum([len(p) for p in parts]) if parts else np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.ends[-1]) if len(self.ends) else 0

    def __getitem__(self, i: int) -> str:  # type: ignore[override]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        part = int(np.searchsorted(self.ends, i, side="right"))
        before = int(self.ends[part - 1]) if part else 0
        return self.parts[part][i - before]


class _Joined(Sequence[str]):
    def __init__(self, base: str, names: Sequence[str]) -> None:
        self.base, self.names = base, names

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, i: int) -> str:  # type: ignore[override]
        return join_url(self.base, self.names[i])


class _Sidecars(Sequence[str]):
    """Sidecars kept in one folder under names derived from the shards' (``index --out``): offsets, or
    per-sample columns with ``named=sample_columns_sidecar``."""

    def __init__(
        self, folder: str, names: Sequence[str], named: Callable[[str], str] = offsets_sidecar
    ) -> None:
        self.folder, self.names, self.named = folder, names, named

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, i: int) -> str:  # type: ignore[override]
        return f"{self.folder}/{self.named(self.names[i])}"


class ShardList:
    """Shard URLs plus, when an index is known, their sample counts.

    Usually made by ``from_source``. ``urls``: the shards' URLs or paths, computed on demand (a pattern,
    a list); ``counts``: samples per shard, an int64 array (None: unknown, no index); ``source``: what the
    shards came from, as errors show it; ``digests``: sha256 per shard, checked when a shard is cached
    (None: none); ``offsets_urls``: where offsets sidecars are kept apart from their shards (None: beside
    each shard); ``keys_url``: the index's sorted key file, for lookup by key (None: none); ``sizes``: each
    shard's bytes as indexed, an int64 array (None: no index), which a local shard must still have before
    its offsets sidecar is trusted.
    """

    def __init__(
        self,
        urls: Sequence[str],
        counts: np.ndarray | None = None,
        source: str = "",
        digests: np.ndarray | None = None,
        offsets_urls: Sequence[str] | None = None,
        keys_url: str | None = None,
        sizes: np.ndarray | None = None,
        cost_sums: np.ndarray | None = None,
    ) -> None:
        if len(urls) == 0:
            raise ValueError(f"source: no shards in {source!r}")
        if counts is not None and len(counts) != len(urls):
            raise FormatError(f"{source}: {len(counts)} counts for {len(urls)} shards")
        self.urls = urls
        self.counts = counts
        self.source = source
        self.digests = digests  # sha256 per shard, an (n, 32) uint8 array, when the index gives them
        self.offsets_urls = offsets_urls  # where sidecars are kept apart from their shards (index --out)
        self.keys_url = keys_url  # the index's sorted key file, for lookup by key
        self.sizes = sizes  # bytes per shard as indexed: a shard of another size has a stale sidecar
        self.cost_sums = cost_sums  # per shard, the sum of its samples' costs (token budgets plan with it)
        self.columns_urls: Sequence[str] | None = None  # .cols apart from their shards, as offsets are
        # per shard, its largest costs, largest first, -1 past each tail's end (``format/tails.py``):
        # a budget weighs a shard from them alone when they hold every cost over it; None: not indexed
        self.cost_tails: np.ndarray | None = None
        # the sha256 of the index's bytes: what keys its sidecars in the node's metadata cache, so workers
        # and ranks fetch each once (``read_small``'s ``version``); None without an index: no node cache
        self.metadata_version: str | None = None
        # A subset's masks (``apply_masks``): ``counts`` are then the samples kept, which every plan deals,
        # and ``shard_counts`` what each shard holds, which its sidecars and reads are checked against.
        self.kept: KeptIndices | JoinedKept | None = None
        self.shard_counts = counts

    def kept_indices(self, shard: int) -> np.ndarray | None:
        """A subset's shard: its kept sample numbers, ascending; None when kept whole or with no subset."""
        return self.kept(shard) if self.kept is not None else None

    def sha256(self, shard: int) -> str | None:
        return self.digests[shard].tobytes().hex() if self.digests is not None else None

    def __len__(self) -> int:
        return len(self.urls)

    @property
    def total(self) -> int | None:
        return int(self.counts.sum()) if self.counts is not None else None

    def offsets_url(self, shard: int) -> str:
        if self.offsets_urls is not None:
            return self.offsets_urls[shard]
        return offsets_name(self.urls[shard])

    def columns_url(self, shard: int) -> str:
        """Where shard ``shard``'s per-sample columns (``.cols``) are: where its offsets sidecar is."""
        if self.columns_urls is not None:
            return self.columns_urls[shard]
        return sample_columns_name(self.urls[shard])

    @classmethod
    def from_source(
        cls, source: str | os.PathLike[str] | Sequence[str] | DatasetIndex, options: OpenOptions | None = None
    ) -> ShardList:
        """The shards a folder (its index), an index, a brace pattern or a list of patterns names.

        A local source is checked here, when the dataset is made, not when a worker first reads it: an index
        or folder that is not there, a path that is no folder, index or file, a pattern whose first or last
        shard is missing (``on_disk``) are FormatErrors saying the fix. Remote sources send no request here
        but their index's.
        """
        if isinstance(source, DatasetIndex):
            raise ValueError("source: pass the index's path or URL, so shard names can be resolved")
        if isinstance(source, (str, os.PathLike)):
            text = os.fspath(source)
            if os.path.isdir(text):
                text = os.path.join(text, INDEX_NAME)
            if os.path.isdir(os.fspath(source)) and not os.path.exists(text):
                beside = os.path.join(os.fspath(source), SUBSET_NAME)
                text = beside if os.path.exists(beside) else text
            if text.endswith(SUBSET_NAME):
                return cls._from_subset(text, options)
            if text.endswith(".json"):
                check_local_index(text)
                return cls._from_index(text, options)
            return cls(on_disk(text), None, redact_url(text))
        if isinstance(source, Sequence) and all(isinstance(s, (str, os.PathLike)) for s in source):
            parts = [on_disk(os.fspath(s)) for s in source]
            return cls(Concat(parts), None, f"{len(parts)} patterns")
        raise ValueError(f"source must be a pattern, a list of patterns or an index path, not {source!r}")

    @classmethod
    def _from_index(cls, url: str, options: OpenOptions | None) -> ShardList:
        data = read_small(url, options)
        if data is None:
            raise FormatError(f"{url}: index not found")
        version = hashlib.sha256(data).hexdigest()
        # A version-2 index's columns file is read the same way, beside the index (local, HTTP, fsspec).
        beside = lambda name: read_small(join_url(url, name), options, version=version)  # noqa: E731
        index = DatasetIndex.from_json(data.decode("utf-8"), source=url, read_columns=beside)
        names: Sequence[str]
        if isinstance(index.shards, ShardColumns):  # arrays straight from the file's bytes: nothing per shard
            names = index.shards.names
            counts = np.frombuffer(index.shards.column("samples"), dtype="<i8")
            sizes = np.frombuffer(index.shards.column("bytes"), dtype="<i8")
            digests = None
            if index.checksums:
                digests = np.frombuffer(index.shards.column("sha256"), dtype=np.uint8).reshape(len(names), 32)
        else:
            names, counts, digests = _from_rows(index, url)
            sizes = np.fromiter((e.size for e in index.shards), dtype=np.int64, count=len(index.shards))
        offsets_urls = columns_urls = None
        if index.sidecars is not None:
            offsets_urls = _Joined(url, _Sidecars(index.sidecars, names))
            columns_urls = _Joined(url, _Sidecars(index.sidecars, names, sample_columns_sidecar))
        keys_url = join_url(url, index.keys) if index.keys is not None else None
        costs = index.column_sums.get(COST) if COST in index.sample_columns else None
        cost_sums = np.asarray(costs, dtype=np.int64) if costs is not None else None
        shards = cls(_Joined(url, names), counts, redact_url(url), digests, offsets_urls, keys_url, sizes)
        shards.cost_sums, shards.columns_urls = cost_sums, columns_urls
        shards.metadata_version = version
        tails = index.column_tails.get(COST) if cost_sums is not None else None
        shards.cost_tails = tail_array(tails) if tails is not None else None
        return shards

    @classmethod
    def _from_subset(cls, url: str, options: OpenOptions | None) -> ShardList:
        """A subset index's dataset with its masks applied (``subsets.read_subset`` checks both)."""
        subset = read_subset(url, options)
        shards = cls._from_index(subset.dataset, options)
        counts = shards.counts if shards.counts is not None else np.zeros(0, dtype=np.int64)
        shards.apply_masks(SubsetMasks(subset.masks, counts, source=subset.masks_source))
        shards.source = f"{redact_url(url)} (a subset of {shards.source})"
        return shards

    def apply_masks(self, masks: SubsetMasks) -> None:
        """Plan on the samples ``masks`` keeps: ``counts`` becomes the kept counts; the index's cost sums
        and tails (of every sample) still check the sidecars, but no longer weigh a shard for a plan
        (``planned_cost_sums``)."""
        self.kept = KeptIndices(masks)
        self.counts = np.array(masks.kept, dtype=np.int64)
        self.cost_tails = None

    @property
    def planned_cost_sums(self) -> np.ndarray | None:
        """Each shard's cost as plans weigh it from the index alone: None for a subset, whose kept
        samples' costs are read from the columns."""
        return None if self.kept is not None else self.cost_sums


PACK_FIRST = f"pack first with `shardstream pack`, or give the folder that holds {INDEX_NAME}"


def check_local_index(text: str) -> None:
    """Refuse a local index that is not there, saying how to make one; a remote one is asked for as read."""
    if scheme_of(text) != "file" or os.path.isfile(local_path(text)):
        return
    folder = os.path.dirname(local_path(text)) or "."
    if os.path.basename(text) == INDEX_NAME and os.path.isdir(folder):
        fix = (
            f"the folder {folder} holds no index: `shardstream pack` into it, or `shardstream index {folder}`"
        )
    else:
        fix = f"no such file; {PACK_FIRST}"
    raise FormatError(f"{redact_url(text)}: index not found: {fix}")


def on_disk(text: str) -> BracePattern:
    """``text``'s pattern, once a local one's first and last shards are on disk (two stats, at any size).

    Checked when the dataset is made, not when a worker first reads a shard mid-epoch; a shard inside the
    range that is missing still fails as it is read. Remote and ``pipe:`` patterns are not asked for here:
    making a dataset sends no request.
    """
    pattern = BracePattern(text)
    if scheme_of(text) != "file":
        return pattern
    shown = redact_url(text)
    if len(pattern) == 1 and "{" not in text:
        if not os.path.exists(local_path(text)):
            raise FormatError(f"{shown} does not exist: no such folder, index or shard; {PACK_FIRST}")
        return pattern
    for which, shard in (("first", 0), ("last", len(pattern) - 1)):
        path = local_path(pattern[shard])
        if os.path.exists(path):
            continue
        folder = os.path.dirname(path) or "."
        why = (
            "the pattern is wider than the shards on disk"
            if shard
            else "check the pattern against the shards on disk"
        )
        see = f"ls {folder} to see them" if os.path.isdir(folder) else f"no such folder {folder}"
        named = f"the pattern names {len(pattern)} shards; the {which}, {path}, does not exist"
        raise FormatError(f"{shown}: {named}: {why} ({see})")
    return pattern


def _from_rows(index: DatasetIndex, url: str) -> tuple[Sequence[str], np.ndarray, np.ndarray | None]:
    """Names, counts and digests of a version-1 index, whose rows are already ShardEntry objects."""
    names: Sequence[str]
    if index.pattern is None:  # names with gaps or no common pattern: the rows name every shard
        names = [entry.name for entry in index.shards]
    else:
        names = BracePattern(index.pattern)
        # Names come from the pattern (O(1)); the index's own list is only checked against it.
        ends = (0, len(names) - 1)
        if len(names) != len(index.shards) or any(names[i] != index.shards[i].name for i in ends):
            raise FormatError(f"{url}: shard names do not follow the pattern {index.pattern!r}")
    counts = np.fromiter((e.samples for e in index.shards), dtype=np.int64, count=len(index.shards))
    digests = None
    if index.checksums:
        raw = b"".join(bytes.fromhex(e.sha256) for e in index.shards)
        digests = np.frombuffer(raw, dtype=np.uint8).reshape(len(index.shards), 32)
    return names, counts, digests
