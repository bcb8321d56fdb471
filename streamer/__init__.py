"""shardstream's streamer: tar shards from disk or HTTP(S) into PyTorch, decoded on the fly.

The names exported here are the user API; every piece stays importable from its module (``streamer.chain.*``).
Names load on first use, so importing the package costs nothing until a name is asked for, and a piece
loads only what it needs (``ShardDataset`` does not import Pillow unless it decodes).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DecodeOptions": "streamer.decode.sample",
    "HttpOptions": "shardstream.io.httpoptions",
    "MixSource": "streamer.mixture.source",
    "Mixture": "streamer.mixture.mixture",
    "MonitorOptions": "streamer.stats.options",
    "ObjectStoreOptions": "shardstream.io.objstoreoptions",
    "OpenOptions": "shardstream.io.openers",
    "Padded": "streamer.batch.collate",
    "RawBatch": "streamer.batch.rawbatch",
    "ShardCache": "shardstream.io.cache",
    "ShardDataset": "streamer.datasets.shard",
    "ShardMap": "streamer.datasets.shardmap",
    "StatefulLoader": "streamer.datasets.loader",
    "collate": "streamer.batch.collate",
    "cu_seqlens": "streamer.budget.collate",
    "pack_collate": "streamer.budget.collate",
    "pad_collate": "streamer.batch.collate",
    "raw_collate": "streamer.batch.rawbatch",
    "register_decoder": "streamer.decode.registry",
    "register_opener": "shardstream.io.openers",
    "watch": "streamer.stats.watch",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'streamer' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
