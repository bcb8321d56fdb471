"""Bytes by URL for everyone: the one URL rule, openers, HTTP, object stores, fsspec, caches, atomic
publish, the journal.

- ``urls.py``: the one URL rule (scheme, local path, what is remote, joining names to an index).
- ``openers.py``: a URL and an offset in, a byte stream out, by scheme in a registry; small reads.
- ``http.py``, ``httpoptions.py``, ``responses.py``: HTTP(S) streams that resume at their byte.
- ``objstore.py``, ``objstoreoptions.py``: s3://, gs://, az:// natively (obstore): parallel parts in order.
- ``objfailures.py``: obstore's failures classified and retried (reads and the packer's writes alike).
- ``flight.py``: the per-process budget of object-store bytes in flight; ``hedge.py``: hedged requests.
- ``fsspecio.py``: every other scheme through fsspec.
- ``metadata.py``: metadata downloads, capped; ``metacache.py``: the node's metadata cache.
- ``samplecolumns.py``: a shard's per-sample columns (.cols) read by URL.
- ``iostats.py``: this process's I/O counters (bytes, requests, retries, read-ahead hits).
- ``cache.py``: the local shard cache; ``localfiles.py``: regular files only.
- ``publish.py``: atomic publish; ``journal.py``: the one journal.
"""
