"""Batches: decoded samples stacked, listed or padded (``collate.py``); raw samples as file references or
one block for the trip out of a DataLoader worker (``rawbatch.py``)."""
