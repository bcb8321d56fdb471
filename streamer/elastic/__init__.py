"""Resuming an epoch on another number of ranks or workers, every sample still once.

- ``deal.py``: what an epoch has left after a checkpoint, and its deal to any ranks x workers (pure).
- ``restore.py``: a ShardDataset's restore from every old rank's state: checked, then the leftover.
"""
