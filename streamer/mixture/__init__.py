"""Mixture: several counted datasets read as one, in planned proportions, exact at every prefix, resumable.

- ``mixture.py``: ``Mixture``, the dataset.
- ``source.py``: ``MixSource``, one source: where it is, how much an epoch reads, how it decodes.
- ``config.py``: a mixture's YAML file.
- ``plan.py``: how many samples of each source a worker reads, and the interleave (pure).
- ``stratify.py``: batch-stratified order (every batch holds each source's share).
- ``schedule.py``: weights over global steps, the running share, the scheduled order (pure).
- ``scheduled.py``: one epoch's plan under a schedule (each worker's budgets and shares).
- ``passes.py``: a source's pass stream, pass after pass in new shard orders.
- ``reader.py``: a worker's mixture stream, each pick served from its source's window.
- ``windows.py``: one source's windows (ids of large samples, else bytes; small sources held).
- ``fetch.py``: windows of ids read as they leave, each by its own source.
- ``chain.py``: a worker's chain of nodes, reader to batches, built for its place.
- ``budget.py``, ``shape.py``: token budgets over sources; the plan's shape and identity.
- ``saving.py``: a mixture's state as plain data (``state_dict``).
- ``resume.py``: the same mixture continued, or a changed one carried on (sources at an epoch boundary).
- ``rest.py``: weights changed mid-epoch: the rest of the epoch dealt under the new ones; carried epochs.
- ``carry.py``: where a source's stream stands: a carried part first, then its pass stream on.
- ``elastic.py``, ``restore.py``: each source's unread part dealt again to any ranks x workers.
- ``_interleave.c``: the interleave's loop in C (optional; Python gives the same picks).
"""
