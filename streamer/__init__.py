"""shardstream's streamer: tar shards from disk or HTTP(S) into PyTorch, decoded on the fly.

Names load on first use, so importing the package costs nothing until a name is asked for, and a piece
loads only what it needs (``ShardDataset`` does not import Pillow unless it decodes).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DecodeOptions": "decode",
    "Errors": "options",
    "HttpOptions": "httpoptions",
    "Mapper": "mapper",
    "MixSource": "mixsource",
    "Mixture": "mixture",
    "ON_ERROR": "options",
    "OpenOptions": "openers",
    "Padded": "collate",
    "Permutation": "permute",
    "Placement": "options",
    "RawBatch": "rawbatch",
    "Reading": "options",
    "Recovery": "recovery",
    "SampleDecoder": "decode",
    "SampleReader": "reader",
    "Segment": "placement",
    "ShardCache": "cache",
    "ShardDataset": "dataset",
    "ShardList": "shards",
    "ShardMap": "shardmap",
    "ShardOpener": "shardopener",
    "ShuffleBuffer": "shuffle",
    "StandIns": "standins",
    "collate": "collate",
    "counted_segments": "placement",
    "iter_samples": "shardopener",
    "open_stream": "openers",
    "pad_collate": "collate",
    "raw_collate": "rawbatch",
    "register_decoder": "decoders",
    "register_opener": "openers",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'streamer' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
