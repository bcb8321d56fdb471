"""shardstream's streamer: tar shards from disk or HTTP(S) into PyTorch, decoded on the fly."""

__all__: list[str] = []
