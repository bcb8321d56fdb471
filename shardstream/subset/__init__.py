"""Subsets: choosing samples by key or by value as per-shard masks, without rewriting a shard (issue 37)."""

from .keys import KeyMatch, SubsetSource, key_masks, match_keys, open_dataset, read_keys
from .make import SubsetOptions, SubsetResult, SubsetSummary, make_subset, subset_masks
from .where import Where, compile_where, function_mask, where_mask

__all__ = [
    "KeyMatch",
    "SubsetOptions",
    "SubsetResult",
    "SubsetSource",
    "SubsetSummary",
    "Where",
    "compile_where",
    "function_mask",
    "key_masks",
    "make_subset",
    "match_keys",
    "open_dataset",
    "read_keys",
    "subset_masks",
    "where_mask",
]
