"""Indexing tars that already exist: scan their headers, write our index, sidecars and key file."""

from .run import IndexOptions, IndexSummary, index_source
from .sources import ShardSource, resolve_source

__all__ = ["IndexOptions", "IndexSummary", "ShardSource", "index_source", "resolve_source"]
