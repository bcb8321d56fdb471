"""The datasets users construct, and what they share.

- ``base.py``: ``StreamBase``, the base of both datasets: epoch and error counters, state checks, pickling.
- ``shard.py``: ``ShardDataset``, one dataset of tar shards, placed, shuffled, decoded and resumable.
- ``shardchain.py``: a ``ShardDataset`` worker's chain of nodes for its place and epoch.
- ``shardresume.py``: ``ShardDataset``'s resumption: its state, a state loaded, where it starts the chain.
- ``shardmap.py``: ``ShardMap``, random access (``len``, ``[i]``, ``.get(key)``) over an index.
- ``loader.py``: ``StatefulLoader``, torchdata's StatefulDataLoader that checks a state at load.
- ``options.py``: the frozen option groups both datasets validate once (placement, reading, errors).
- ``shared.py``: the counters the main process and its DataLoader workers share.
"""
