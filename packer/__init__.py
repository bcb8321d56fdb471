"""shardstream's offline packer: raw files or a manifest in, size-capped tar shards and an index out."""

from .errors import (
    FormatError,
    KeyRuleError,
    MediaError,
    PackError,
    RejectedInput,
    ShardNotFoundError,
    ShardReadError,
    ShardstreamError,
)
from .options import PackOptions, parse_size
from .pack import PackSummary, ProgressHook, pack
from .verify import verify_dataset

__all__ = [
    "FormatError",
    "KeyRuleError",
    "MediaError",
    "PackError",
    "PackOptions",
    "PackSummary",
    "ProgressHook",
    "RejectedInput",
    "ShardNotFoundError",
    "ShardReadError",
    "ShardstreamError",
    "pack",
    "parse_size",
    "verify_dataset",
]
