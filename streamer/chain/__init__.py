"""The iterator nodes a dataset chains, each with ``reset(state)``/``get_state()``, one concept a file.

- ``node.py``: ``Node``, the base every node subclasses (its contract: tests/streamer/chain/test_contract.py).
- ``opener.py``: ``ShardOpener``, a shard opened at a sample (offsets sidecar, one seek or Range request).
- ``sidecar.py``: the offsets sidecar loaded, trusted while a local shard keeps its size, and fetched
  beside the open of a remote shard read from its start.
- ``onesample.py``: one sample read from its bytes by the offsets sidecar (deferred reads, restores).
- ``subsetread.py``: a subset's shard read, only its kept samples, a run of neighbours a seek.
- ``prefetch.py``: read-ahead of the next shards in a background thread.
- ``reader.py``: ``SampleReader``, a worker's segments read as samples, in order.
- ``deferred.py``: deferred reads (the buffer holds ids; ``Fetch`` reads a sample as it leaves).
- ``coalesce.py``: deferred reads of remote shards, coalesced into ranged GETs of many samples.
- ``shuffle.py``: ``ShuffleBuffer``, a bounded shuffle whose state names samples, not bytes.
- ``mapper.py``: ``Mapper``, a function (decoding, above all) applied to every sample.
- ``recovery.py``: the error policy: raise, or skip, count and owe a stand-in.
- ``standins.py``: ``StandIns``, stand-ins for lost samples, paid in one place.
"""
