"""shardstream's offline packer: raw files or a manifest in, size-capped tar shards and an index out."""

from shardstream.errors import MediaError, PackError, RejectedInput
from shardstream.format.verify import verify_dataset

from .media import MediaOptions
from .options import PackOptions
from .pack import PackSummary, pack
from .progress import ProgressHook

__all__ = [
    "MediaError",
    "MediaOptions",
    "PackError",
    "PackOptions",
    "PackSummary",
    "ProgressHook",
    "RejectedInput",
    "pack",
    "verify_dataset",
]
