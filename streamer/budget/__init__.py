"""Token budgets: batches planned by per-sample cost, with the same number of batches on every rank.

- ``deal.py``: the epoch's stream cut into equal-cost slices, one per rank and worker (a pure function of
  the per-shard cost sums, the seed and the place; it reads the cost column of the shards it cuts).
- ``target.py``: how many batches every rank and worker yields: one number, from the total cost and a
  fill probed on the first shards (once, when the dataset is made), the same everywhere without
  communication.
- ``batcher.py``: one worker's samples, in stream order, packed into exactly that many batches within the
  budget ("pack": costs sum to at most it; "pad": count x largest cost at most it), through a bounded
  window; what cannot fit is left out and counted, a shortfall filled by counted repeats.
- ``pool.py``: that window, sorted by cost (a C type, ``_pool.c``, when built; else a list), and the
  takes that make a batch of it.
- ``plan.py``: the options record (``BudgetOptions``) and a worker's epoch (``slot_plan``), pure functions.
- ``columns.py``: the cost column, read per shard from its ``.cols`` sidecar.
- ``node.py``: the chain's last node, the batcher with its state saved (its window by ids).
- ``elastic.py``: an elastic restore's leftover dealt again by cost (``deal_by_cost``).
- ``collate.py``: a packed batch's ``cu_seqlens`` and ``max_seqlen`` for varlen attention, from costs.
- ``setup.py``: what ``ShardDataset(batch_tokens=...)`` calls: the budget made, planned and restored.
"""
