"""Pack options: one frozen record, validated once, with the subset that shapes the output's bytes."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from .media import MediaOptions
from .sources.manifest import MEMBER_NAMINGS
from .sources.records import FORMATS

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def parse_size(text: str | int, *, name: str = "max_size") -> int:
    """Bytes from ``256MB`` (10^6), ``1GiB`` (2^30), ``4096`` or an int."""
    if isinstance(text, int):
        value = text
    else:
        match = _SIZE.match(str(text))
        if not match:
            raise ValueError(f"{name}: cannot read {text!r} as a size; use e.g. 256MB, 1GiB or 1048576")
        number, unit = match.groups()
        unit = unit.lower()
        letter = unit[:1] if unit[:1] != "b" else ""
        scale = 1024 ** ("kmgt".index(letter) + 1) if "i" in unit else _UNITS[letter]
        value = int(float(number) * scale)
    if value <= 0:
        raise ValueError(f"{name} must be positive, not {text!r}")
    return value


@dataclass(frozen=True)
class PackOptions:
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

    def validate(self) -> None:
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
        self.media.validate()

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
        return out
