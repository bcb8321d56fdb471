"""Pack options: one frozen record, validated once when made; the subset that shapes the output's bytes."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from shardstream.format.costestimate import estimate_parameters, is_estimate

from .media import MediaOptions
from .sources.manifest import MEMBER_NAMINGS
from .sources.records import FORMATS

_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class PackOptions:
    """What a pack makes and how. ``cost``: a field of each sample's record (a manifest's row, a folder's
    KEY.json, a Python record's key) holding a non-negative integer (tokens, or any unit); each shard then
    gets a ``.cols`` file of these values (``format/samplecols.py``, column "cost", always u8) and the index
    their sums per shard. A missing, negative, fractional or non-numeric value is a ``bad-cost`` reject.
    ``"@estimate"`` (or ``"@estimate:chars_per_token=4,image_tokens=576"``): a built-in estimate from the
    sample's text and media members instead (``shardstream/format/costestimate.py``).
    The other fields are documented by ``shardstream pack --help``."""

    prefix: str = "train"
    max_size: int | None = 256 * 10**6
    max_count: int | None = None
    workers: int = 1
    key_field: str | None = None
    media_root: str | None = None
    media_fields: tuple[str, ...] | None = None
    member_naming: str = "ext"
    manifest_format: str | None = None
    media: MediaOptions = field(default_factory=MediaOptions)
    strict: bool = False
    resume: bool = False
    overwrite: bool = False
    cost: str | None = None

    def __post_init__(self) -> None:
        if not _PREFIX.match(self.prefix):
            raise ValueError(f"prefix must be letters, digits, '_', '-' or '.', not {self.prefix!r}")
        if self.max_size is None and self.max_count is None:
            raise ValueError("max_size and max_count cannot both be unset; shards need a limit")
        if self.max_count is not None and self.max_count < 1:
            raise ValueError(f"max_count must be >= 1, not {self.max_count}")
        if self.max_size is not None and self.max_size < 2048:
            raise ValueError(
                f"max_size must be at least 2048 bytes (one member plus tar's end), not {self.max_size}"
            )
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, not {self.workers}")
        if self.member_naming not in MEMBER_NAMINGS:
            raise ValueError(f"member_naming must be one of {MEMBER_NAMINGS}, not {self.member_naming!r}")
        if self.manifest_format is not None and self.manifest_format not in FORMATS:
            raise ValueError(f"manifest_format must be one of {FORMATS}, not {self.manifest_format!r}")
        if self.resume and self.overwrite:
            raise ValueError("resume and overwrite cannot both be set")
        if self.cost is not None and (not isinstance(self.cost, str) or not self.cost):
            raise ValueError(f"cost must name a field of the records, not {self.cost!r}")
        if self.cost is not None and is_estimate(self.cost):
            estimate_parameters(self.cost)  # a bad parameter is refused here, not at the first sample
        if not isinstance(self.media, MediaOptions):
            raise ValueError(f"media must be MediaOptions, not {self.media!r}")

    def output_options(self, source: str) -> dict[str, Any]:
        """The options that decide the output bytes; a resume must match them, the index records them."""
        out = {
            "source": source,
            "prefix": self.prefix,
            "max_size": self.max_size,
            "max_count": self.max_count,
            "key_field": self.key_field,
            "media_root": self.media_root,
            "media_fields": list(self.media_fields) if self.media_fields else None,
            "member_naming": self.member_naming,
            "manifest_format": self.manifest_format,
        }
        out.update({f"media.{k}": v for k, v in asdict(self.media).items()})
        if self.cost is not None:  # only when set: indexes packed without it keep their bytes
            out["cost"] = self.cost
        return out
