"""shardstream's streamer: tar shards from disk or HTTP(S) into PyTorch, decoded on the fly.

Names load on first use, so ``shardstream pack`` does not pay for importing torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "HttpOptions": "http",
    "ON_ERROR": "reader",
    "OpenOptions": "openers",
    "Padded": "collate",
    "Permutation": "permute",
    "SampleDecoder": "decode",
    "SampleReader": "reader",
    "Segment": "placement",
    "ShardDataset": "dataset",
    "ShardCache": "cache",
    "ShardList": "shards",
    "ShuffleBuffer": "shuffle",
    "collate": "collate",
    "counted_segments": "placement",
    "iter_samples": "reader",
    "open_stream": "openers",
    "pad_collate": "collate",
    "register_decoder": "decode",
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
