"""Per-sample columns computed by a user's function over a dataset that exists: only .cols sidecars and
the index are written, never a shard (``shardstream columns``).

- ``shard.py``: one shard's work: its raw samples through the function, its .cols merged and published.
- ``run.py``: every shard (a process pool, or Ray tasks from ``onray.py``), journaled, then the index.
"""

from .run import ColumnOptions, ColumnSummary, compute_columns
from .shard import load_function

__all__ = ["ColumnOptions", "ColumnSummary", "compute_columns", "load_function"]
