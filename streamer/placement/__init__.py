"""Which shards and samples each rank and worker reads: pure functions of counts, seed, epoch and place.

- ``shards.py``: ``ShardList``, the shard URLs (a brace pattern, a list or the packer's index) and counts.
- ``subsets.py``: a subset index opened and checked, or ``include``/``exclude``/``where`` applied: the
  kept samples' counts are what every plan deals (``shardstream/format/subsetmasks.py``).
- ``segments.py``: an epoch's shard order and each rank's and worker's segments of it.
- ``permute.py``: keyed pseudo-random permutations in O(1) memory (a Feistel network).
- ``_order.c``: the shard order's loop in C (optional; numpy gives the same order).
"""
