"""shardstream's streamer: tar shards from disk or HTTP(S) into PyTorch, decoded on the fly.

Names load on first use, so importing the package costs nothing until a name is asked for, and a piece
loads only what it needs (``ShardDataset`` does not import Pillow unless it decodes).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DecodeOptions": "streamer.decode.sample",
    "Errors": "streamer.datasets.options",
    "HttpOptions": "shardstream.io.httpoptions",
    "Mapper": "streamer.chain.mapper",
    "MixSource": "streamer.mixture.source",
    "Mixture": "streamer.mixture.mixture",
    "ON_ERROR": "streamer.datasets.options",
    "OpenOptions": "shardstream.io.openers",
    "Padded": "streamer.batch.collate",
    "Permutation": "streamer.placement.permute",
    "Placement": "streamer.datasets.options",
    "RawBatch": "streamer.batch.rawbatch",
    "Reading": "streamer.datasets.options",
    "Recovery": "streamer.chain.recovery",
    "SampleDecoder": "streamer.decode.sample",
    "SampleReader": "streamer.chain.reader",
    "Segment": "streamer.placement.segments",
    "ShardCache": "shardstream.io.cache",
    "ShardDataset": "streamer.datasets.shard",
    "ShardList": "streamer.placement.shards",
    "ShardMap": "streamer.datasets.shardmap",
    "ShardOpener": "streamer.chain.opener",
    "ShuffleBuffer": "streamer.chain.shuffle",
    "StandIns": "streamer.chain.standins",
    "collate": "streamer.batch.collate",
    "counted_segments": "streamer.placement.segments",
    "iter_samples": "streamer.chain.opener",
    "open_stream": "shardstream.io.openers",
    "pad_collate": "streamer.batch.collate",
    "raw_collate": "streamer.batch.rawbatch",
    "register_decoder": "streamer.decode.registry",
    "register_opener": "shardstream.io.openers",
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
