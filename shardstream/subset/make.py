"""Making a subset: include, exclude and where rules to per-shard sample masks; no shard read or rewritten."""

# Kept = (matched by include, when given) and not (matched by exclude) and (where holds). Keys go through
# the sorted key file (keys.py); a where-clause reads each shard's small .cols sidecar, and only for shards
# the key rules left something in. What each rule left out is counted in that order (include, then
# exclude, then where), so the counts add up to the samples left out. Masks are held a byte a sample for
# the shards partly kept: a whole dataset of 10^8 samples would hold 100 MB at most while it is written.

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import redact_url
from ..format.subsetindex import SUBSET_NAME, write_subset
from ..io.openers import OpenOptions
from ..io.samplecolumns import read_sample_columns
from .keys import KeyMatch, KeySource, Progress, SubsetSource, match_keys, open_dataset, read_keys
from .where import Where, compile_where, function_mask

RULES = ("include", "exclude", "where")


@dataclass(frozen=True, kw_only=True)
class SubsetOptions:
    """What a subset keeps. ``include``: keys to keep (a text file, a ``.parquet`` file or an iterable of
    str; None: every key); ``exclude``: keys to leave out, the same kinds; ``where``: an expression over
    the per-sample columns (``"cost < 4096 and quality >= 5"``) or a function of the columns dict that
    returns a bool array; ``column``: the Parquet column holding keys (default: its only string column)."""

    include: KeySource | None = None
    exclude: KeySource | None = None
    where: str | Callable[[dict[str, np.ndarray]], Any] | None = None
    column: str | None = None

    def __post_init__(self) -> None:
        if self.include is None and self.exclude is None and self.where is None:
            raise ValueError("SubsetOptions: give at least one of include, exclude or where")
        if self.where is not None and not (isinstance(self.where, str) or callable(self.where)):
            raise ValueError(f"where must be an expression (str) or a function, not {self.where!r:.60}")
        if self.column is not None and (not isinstance(self.column, str) or not self.column):
            raise ValueError(f"column must name a Parquet column, not {self.column!r}")
        if self.column is not None and self.include is None and self.exclude is None:
            raise ValueError("column names the Parquet column of include or exclude keys; neither is given")


@dataclass(frozen=True, kw_only=True)
class SubsetResult:
    """The masks a subset is made of, and what each rule did. ``masks``: one per shard, a bool array of
    its count or None for a shard kept whole; ``left_out``: samples each rule left out (in the order
    include, exclude, where); ``include`` / ``exclude``: the key walks' counts; ``rule``: all of it, as the
    subset index records it."""

    index_url: str
    index_bytes: bytes
    counts: np.ndarray
    masks: list[np.ndarray | None]
    samples: int
    kept: int
    left_out: dict[str, int]
    include: KeyMatch | None = None
    exclude: KeyMatch | None = None
    rule: dict[str, Any] = field(default_factory=dict)

    @property
    def keys_missing(self) -> int:
        return sum(match.missing for match in (self.include, self.exclude) if match is not None)


@dataclass(frozen=True, kw_only=True)
class SubsetSummary:
    """What ``make_subset`` wrote: the subset index ``index`` in ``out``, and the result's counts."""

    out: str
    index: str
    dataset: str
    samples: int
    kept: int
    left_out: dict[str, int]
    rule: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "out": self.out,
            "index": self.index,
            "dataset": self.dataset,
            "samples": self.samples,
            "kept": self.kept,
            "left_out": dict(self.left_out),
            "rule": self.rule,
        }


def subset_masks(
    dataset: str | os.PathLike[str],
    options: SubsetOptions,
    *,
    open_options: OpenOptions | None = None,
    progress: Progress | None = None,
) -> SubsetResult:
    """The masks ``options`` choose from ``dataset`` (a folder holding its index, or the index's path or
    URL). The where-expression is checked, and its columns against the dataset's, before any key is read."""
    source = open_dataset(dataset, open_options)
    where = _where(source, options.where)
    include = exclude = None
    if options.include is not None:
        include = match_keys(
            source, _keys(options.include, options.column, "include"), open_options, progress
        )
    if options.exclude is not None:
        exclude = match_keys(
            source, _keys(options.exclude, options.column, "exclude"), open_options, progress
        )
    given = (include, exclude, options.where)
    left_out = {rule: 0 for rule, used in zip(RULES, given, strict=True) if used is not None}
    masks: list[np.ndarray | None] = []
    counts = source.counts
    for shard, count in enumerate(counts.tolist()):
        mask = None
        if include is not None:
            mask = include.mask(shard, count)
            if mask is None:
                mask = np.zeros(count, dtype=bool)
            left_out["include"] += count - int(np.count_nonzero(mask))
        if exclude is not None:
            mask = _drop(mask, exclude.mask(shard, count), left_out, "exclude", count)
        if options.where is not None and (mask is None or mask.any()):
            held = _where_mask(source, shard, count, where, options.where, open_options)
            mask = _drop(mask, ~held, left_out, "where", count)
        if progress is not None and options.where is not None:
            progress("columns", shard + 1, len(counts))
        masks.append(mask)
    samples = int(counts.sum())
    kept = samples - sum(left_out.values())
    rule = _rule(options, include, exclude, left_out)
    return SubsetResult(
        index_url=source.url,
        index_bytes=source.data,
        counts=counts,
        masks=masks,
        samples=samples,
        kept=kept,
        left_out=left_out,
        include=include,
        exclude=exclude,
        rule=rule,
    )


def make_subset(
    dataset: str | os.PathLike[str],
    out: str | os.PathLike[str],
    options: SubsetOptions,
    *,
    open_options: OpenOptions | None = None,
    progress: Progress | None = None,
) -> SubsetSummary:
    """``subset_masks``, then the subset written into the folder ``out`` (``shardstream-subset.json`` and
    its masks, format/subsetindex.py); no shard is copied or rewritten."""
    result = subset_masks(dataset, options, open_options=open_options, progress=progress)
    written = write_subset(
        out,
        dataset=result.index_url,
        index_bytes=result.index_bytes,
        counts=result.counts,
        masks=result.masks,
        rule=result.rule,
    )
    return SubsetSummary(
        out=os.fspath(out),
        index=os.path.join(os.fspath(out), SUBSET_NAME),
        dataset=redact_url(result.index_url),
        samples=written.samples,
        kept=written.kept,
        left_out=dict(result.left_out),
        rule=result.rule,
    )


def _keys(source: KeySource, column: str | None, what: str) -> Any:
    """The keys of ``source``; the first one is read here, so a missing file fails naming the rule."""
    keys = read_keys(source, column=column)
    try:
        first = next(keys, None)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None
    if first is None:
        return iter(())
    return _chain(first, keys)


def _chain(first: str, rest: Any) -> Any:
    yield first
    yield from rest


def _drop(
    mask: np.ndarray | None, dropped: np.ndarray | None, left_out: dict[str, int], rule: str, count: int
) -> np.ndarray | None:
    """``mask`` less the samples ``dropped`` marks (None: none), counting those it held under ``rule``."""
    if dropped is None:
        return mask
    base = np.ones(count, dtype=bool) if mask is None else mask
    kept = base & ~dropped
    left_out[rule] += int(np.count_nonzero(base)) - int(np.count_nonzero(kept))
    return None if kept.all() else kept


def _where(source: SubsetSource, where: Any) -> Where | None:
    """The expression checked against the dataset's columns before anything else is read."""
    if where is None:
        return None
    have = source.index.sample_columns
    shown = redact_url(source.url)
    if not have:
        raise ValueError(
            f"where: {shown} has no per-sample columns; add them with `shardstream columns` (or pack or "
            "index with --cost)"
        )
    if callable(where):
        return None
    compiled = compile_where(where)
    unknown = sorted(compiled.names - set(have))
    if unknown:
        raise ValueError(
            f"where: {unknown[0]!r} is not a column of {shown}; its columns are: {', '.join(sorted(have))}"
        )
    return compiled


def _where_mask(
    source: SubsetSource,
    shard: int,
    count: int,
    compiled: Where | None,
    where: Any,
    options: OpenOptions | None,
) -> np.ndarray:
    """What the where-rule keeps of one shard, from its .cols sidecar."""
    why = (
        f"missing; the index {redact_url(source.url)} says every shard has per-sample columns: restore "
        "it, or write them again with `shardstream columns`"
    )
    columns = read_sample_columns(
        source.columns_url(shard), options, samples=count, version=None, missing=why
    )
    if compiled is not None:
        return compiled.mask({name: columns[name] for name in compiled.names}, count)
    return function_mask(where, columns, count)


def _rule(
    options: SubsetOptions, include: KeyMatch | None, exclude: KeyMatch | None, left_out: dict[str, int]
) -> dict[str, Any]:
    """How the subset was chosen, for people reading its index."""
    rule: dict[str, Any] = {}
    for name, source, match in (("include", options.include, include), ("exclude", options.exclude, exclude)):
        if match is None:
            continue
        rule[name] = {
            "keys": describe(source),
            "given": match.keys,
            "found": match.found,
            "missing": match.missing,
            "matched_samples": match.matched,
            "left_out": left_out[name],
        }
        if options.column is not None:
            rule[name]["column"] = options.column
    if options.where is not None:
        shown = (
            options.where if isinstance(options.where, str) else getattr(options.where, "__qualname__", "")
        )
        kind = "expression" if isinstance(options.where, str) else "function"
        rule["where"] = {kind: shown, "left_out": left_out["where"]}
    return rule


def describe(source: Any) -> str:
    """A key source as a rule records it: a path, or what kind of Python collection and how big."""
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    size = f" of {len(source)} keys" if hasattr(source, "__len__") else ""
    return f"a Python {type(source).__name__}{size}"
