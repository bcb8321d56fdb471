"""Every error shardstream raises, in one tree, so callers can catch at the depth they care about.

    ShardstreamError
    ├── FormatError              a pattern, key, index or offsets file that breaks the shard format
    │   └── KeyRuleError         a key the key/extension rule would split differently on reading
    ├── PackError                the packer cannot go on (empty source, refused OUTDIR, bad resume state)
    │   └── RejectedInput        one sample/record/file is unusable; skipped and reported unless --strict
    │       └── MediaError       a media file that does not decode (or re-encode)
    └── StreamError              reading one sample failed; carries the URL, member and byte offset
        ├── ShardReadError       the shard's bytes could not be read (I/O, damage, HTTP)
        │   ├── ShardNotFoundError  the shard (or a sidecar) does not exist: 404, 410, no such file
        │   └── StaleSidecarError   the shard changed after it was indexed: its sidecar no longer fits
        ├── DecodeError          a member's bytes were read but do not decode
        └── MissingMemberError   a member asked for (``fields=``) is not in the sample; also a KeyError

Option errors are plain ``ValueError`` naming the argument. Every error pickles with its fields, so one
raised in a pack worker or a DataLoader worker reaches the main process whole.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "SECRET_QUERY_PARAMS",
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
    "StaleSidecarError",
    "StreamError",
    "redact_url",
    "short_reason",
]

# scheme://user:password@ (or user@) in any text: errors name URLs, and must not show who logs in. To the
# last @, as a password may hold one; one slash is enough, as pathlib folds http://u:p@h into http:/u:p@h.
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*:/{1,2})[^/?#\s]*@")

# Query parameters whose value is a credential, compared without case: presigned S3 (AWS SigV2/V4) and GCS
# URLs, CloudFront, Azure SAS (sig), OAuth and API keys. Their values are shown as *** (the name stays, so
# a message still says the URL was presigned); a parameter not listed here is shown as it is.
SECRET_QUERY_PARAMS = (
    "X-Amz-Signature",
    "X-Amz-Credential",
    "X-Amz-Security-Token",
    "X-Goog-Signature",
    "X-Goog-Credential",
    "AWSAccessKeyId",
    "Signature",
    "Key-Pair-Id",
    "Policy",
    "sig",
    "token",
    "access_token",
    "id_token",
    "refresh_token",
    "api_key",
    "apikey",
    "key",
    "password",
    "secret",
    "client_secret",
)
_SECRET_QUERY = re.compile(
    r"([?&](?:" + "|".join(map(re.escape, SECRET_QUERY_PARAMS)) + r")=)[^&#\s'\":;,()<>]*", re.IGNORECASE
)


def redact_url(text: str) -> str:
    """``text`` (a URL, or a message naming URLs) with every URL's user:password@ cut out and the values of
    its credential query parameters (``SECRET_QUERY_PARAMS``) shown as ``***``: how every URL that leaves
    the reader is shown (samples' ``__url__``, errors, warnings, the index's rows, the command line). The URL
    that opens the shard keeps them."""
    if "@" in text:
        text = _USERINFO.sub(r"\1", text)
    return _SECRET_QUERY.sub(r"\1***", text) if "=" in text else text


class ShardstreamError(Exception):
    """Base of every shardstream error. Its message never shows a URL's user:password or token."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*(redact_url(a) if isinstance(a, str) else a for a in args))


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
        return type(self), (self.source, self.reason)


class MediaError(RejectedInput):
    """A media file failed to decode or re-encode."""


class StreamError(ShardstreamError):
    """Reading a sample failed; says where (URL, member, byte offset), so a user can find the bad bytes."""

    # url defaults to "" so that torch's DataLoader can rebuild it from a worker's message alone.
    def __init__(
        self, message: str, *, url: str = "", member: str | None = None, offset: int | None = None
    ) -> None:
        url = redact_url(url)
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

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""  # KeyError, a base of one subclass, would quote it

    def located(self, offset: int | None) -> StreamError:
        """The same error with the byte offset filled in (found only on the error path)."""
        if offset is None or self.offset is not None:
            return self
        return type(self)(self.message, url=self.url, member=self.member, offset=offset)

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), self.message, self.url, self.member, self.offset)


def _rebuild(
    cls: type[StreamError], message: str, url: str, member: str | None, offset: int | None
) -> StreamError:
    return cls(message, url=url, member=member, offset=offset)


class ShardReadError(StreamError):
    """A shard's bytes could not be read: I/O error, damaged tar, HTTP failure."""


class ShardNotFoundError(ShardReadError):
    """The object is not there (HTTP 404/410, no such file): retrying will not help."""


class StaleSidecarError(ShardReadError):
    """The shard no longer matches its offsets sidecar (or its index): none of the sidecar's offsets into
    it can be trusted, so the rest of the shard is lost, not read from the next offset."""


class DecodeError(StreamError):
    """A member was read whole but its decoder failed on it (a corrupt JPEG, a cut-off video)."""


class MissingMemberError(StreamError, KeyError):
    """A member asked for with ``fields=`` is not in the sample; a KeyError too, as a missing key is."""


def short_reason(exc: BaseException) -> str:
    """An exception's first line without decoder noise, for messages that name the file themselves."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    # torchcodec prefixes C++ frames ("SingleStreamDecoder, /path/File.cpp:70, ..."); Pillow names the
    # BytesIO it was handed, which tells a reader nothing.
    return re.sub(r"^.*\.cpp:\d+, | <_io\.BytesIO object at 0x[0-9a-f]+>", "", first)
