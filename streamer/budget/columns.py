"""A dataset's per-sample cost column, read per shard from its ``.cols`` sidecar and kept for a few shards.

A budget reads the column of a shard three ways: the cuts and the probe (once per epoch, a few shards),
its own shards (summed, front to back) and each sample as it reaches the batcher (in stream order, so a
small cache of the last shards read serves it). A sidecar is checked whole on read (``samplecols``): a
count other than the index's, a damaged or missing file, is a FormatError naming it and the fix.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from shardstream.errors import FormatError
from shardstream.format.samplecols import COST
from shardstream.io.openers import OpenOptions
from shardstream.io.samplecolumns import read_sample_columns

from ..placement.shards import ShardList

CACHED_SHARDS = 8  # a shuffle buffer mixes samples of a few shards at a time


def check_costed(shards: ShardList) -> None:
    """ValueError, with the fix, unless the index gives per-sample costs and per-shard counts."""
    if shards.counts is None or shards.cost_sums is None:
        raise ValueError(
            f"batch_tokens needs each sample's cost, and {shards.source} has no cost column: pack with "
            "`shardstream pack ... --cost FIELD` (a field of each record, e.g. num_tokens), or add one with "
            "`shardstream index SOURCE --cost FIELD`"
        )


class CostColumns:
    """``columns(shard)``: shard ``shard``'s samples' costs, an int64 array, read from its sidecar.

    ``shards``: the dataset's ShardList (with counts and cost sums); ``options``: how sidecars are reached
    (HTTP settings, cache)."""

    def __init__(self, shards: ShardList, options: OpenOptions | None = None) -> None:
        check_costed(shards)
        self.shards, self.options = shards, options
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()

    def __call__(self, shard: int) -> np.ndarray:
        cached = self._cache.get(shard)
        if cached is not None:
            self._cache.move_to_end(shard)
            return cached
        costs = self._read(shard)
        self._cache[shard] = costs
        if len(self._cache) > CACHED_SHARDS:
            self._cache.popitem(last=False)
        return costs

    def _read(self, shard: int) -> np.ndarray:
        url = self.shards.columns_url(shard)
        expected = int(self.shards.shard_counts[shard])  # type: ignore[index]
        why = (
            f"the per-sample columns of shard {shard} are missing (the index declares a cost column); "
            "restore the .cols file, or pack or index again with --cost"
        )
        version = self.shards.metadata_version
        columns = read_sample_columns(url, self.options, samples=expected, version=version, missing=why)
        if COST not in columns:
            raise FormatError(
                f"{url}: holds no {COST!r} column ({sorted(columns)}), though the index has one"
            )
        costs = columns[COST].astype(np.int64)
        if expected and int(costs.sum()) != int(self.shards.cost_sums[shard]):  # type: ignore[index]
            raise FormatError(
                f"{url}: its costs add up to {int(costs.sum())}, the index says "
                f"{int(self.shards.cost_sums[shard])}: a stale sidecar; index or pack again"  # type: ignore[index]
            )
        indices = self.shards.kept_indices(shard)  # a subset's: its kept samples', as plans number them
        return costs if indices is None else costs[indices]
