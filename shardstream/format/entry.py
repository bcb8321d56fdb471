"""One shard as the index lists it: a small frozen record, made on demand when the index holds columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ShardEntry:
    """``sha256`` is lowercase hex, or "" when it was not computed (``shardstream index`` without
    ``--checksum``)."""

    name: str
    samples: int
    size: int
    sha256: str

    def to_row(self) -> list[Any]:
        return [self.name, self.samples, self.size, self.sha256]
