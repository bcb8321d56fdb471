"""shardstream's core, shared by the packer and the streamer: the shard format, errors, sizes, the CLI.

``packer`` and ``streamer`` import from here and never from each other. Nothing here imports torch or
Pillow at import time; the command line (``shardstream_cli``) loads the packer or the streamer only for the
command that needs it.
"""

from .errors import (
    DecodeError,
    FormatError,
    KeyRuleError,
    MediaError,
    MissingMemberError,
    PackError,
    RejectedInput,
    ShardNotFoundError,
    ShardReadError,
    ShardstreamError,
    StreamError,
)
from .sizes import format_size, parse_size

__version__ = "0.1.0"

__all__ = [
    "DecodeError",
    "FormatError",
    "KeyRuleError",
    "MediaError",
    "MissingMemberError",
    "PackError",
    "RejectedInput",
    "ShardNotFoundError",
    "ShardReadError",
    "ShardstreamError",
    "StreamError",
    "__version__",
    "format_size",
    "parse_size",
]
