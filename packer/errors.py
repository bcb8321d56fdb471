"""Every error shardstream raises, in one tree, so callers can catch at the depth they care about.

    ShardstreamError
    ├── FormatError            a pattern, key, index or offsets file that breaks the shard format
    │   └── KeyRuleError       a key the key/extension rule would split differently on reading
    ├── PackError              the packer cannot go on (empty source, refused OUTDIR, bad resume state)
    │   └── RejectedInput      one sample/record/file is unusable; skipped and reported unless --strict
    │       └── MediaError     a media file that does not decode (or re-encode)
    └── ShardReadError         reading a shard failed; carries the URL, member and byte offset
        └── ShardNotFoundError the shard (or a sidecar) does not exist: 404, 410, no such file

Option errors are plain ``ValueError`` naming the argument.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "FormatError",
    "KeyRuleError",
    "MediaError",
    "PackError",
    "RejectedInput",
    "ShardNotFoundError",
    "ShardReadError",
    "ShardstreamError",
]


class ShardstreamError(Exception):
    """Base of every shardstream error."""


class FormatError(ShardstreamError):
    """Something violates the shard format."""


class KeyRuleError(FormatError):
    """A sample key that would not survive the key/extension rule on reading."""


class PackError(ShardstreamError):
    """The packer cannot continue."""


class RejectedInput(PackError):
    """One input (record, file or sample) was rejected; ``source`` names it, ``reason`` says why."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"{source}: {reason}")
        self.source = source
        self.reason = reason

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        # Errors cross process boundaries (pack workers, DataLoader workers); keep them picklable.
        return type(self), (self.source, self.reason)


class MediaError(RejectedInput):
    """A media file failed to decode or re-encode."""


class ShardReadError(ShardstreamError):
    """A shard could not be read; names where, so a user can find the bad bytes."""

    # url defaults to "" so that torch's DataLoader can rebuild it from a worker's message alone.
    def __init__(
        self, message: str, *, url: str = "", member: str | None = None, offset: int | None = None
    ) -> None:
        where = url
        if member is not None:
            where += f" member {member!r}"
        if offset is not None:
            where += f" at byte {offset}"
        super().__init__(f"{where}: {message}" if where else message)
        self.url = url
        self.member = member
        self.offset = offset
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild_read_error, (type(self), self.message, self.url, self.member, self.offset)


def _rebuild_read_error(
    cls: type[ShardReadError], message: str, url: str, member: str | None, offset: int | None
) -> ShardReadError:
    return cls(message, url=url, member=member, offset=offset)


class ShardNotFoundError(ShardReadError):
    """The object is not there (HTTP 404/410, no such file): retrying will not help."""
