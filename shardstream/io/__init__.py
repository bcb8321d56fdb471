"""Bytes by URL for everyone: the one URL rule, openers, HTTP, fsspec, the shard cache, atomic
publish, the journal."""
