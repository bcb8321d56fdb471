"""What an HTTP response tells a reader: its total length, Retry-After, the If-Range validator for a
resume, whether a 206 holds the bytes asked for, whether a certificate problem will recur, an error in a
word; and draining an error's body.

Pure functions of a urllib3 response or exception, apart from the stream that uses them (``http.py``).
Trade-off: a second module for the HTTP reader, so that the stream's retry loop reads on one screen.
"""

from __future__ import annotations

import re
from typing import Any

from urllib3.exceptions import HTTPError, MaxRetryError, SSLError


def discard(response: Any) -> None:
    """Read an error answer's body before the connection goes back to the pool.

    Released unread, its leftover bytes would be parsed as the next response's status line.
    """
    try:
        response.drain_conn()
        response.release_conn()
    except HTTPError:
        response.close()


def reason(exc: BaseException) -> str:
    inner = exc.reason if isinstance(exc, MaxRetryError) and exc.reason is not None else exc
    return type(inner).__name__


def certificate_problem(exc: BaseException) -> bool:
    """A certificate that fails verification will fail the same way on every retry."""
    import ssl

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(seen):
            return True
        if isinstance(seen, MaxRetryError) and isinstance(seen.reason, SSLError):
            seen = seen.reason
            continue
        seen = seen.__cause__ or seen.__context__
    return False


def retry_after(response: Any) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def total_length(response: Any, offset: int) -> int | None:
    content_range = response.headers.get("content-range")
    if content_range and "/" in content_range:
        total = content_range.rsplit("/", 1)[1]
        return int(total) if total.isdigit() else None
    length = response.headers.get("content-length")
    if length is None or not length.isdigit():
        return None
    return int(length) + (offset if response.status == 206 else 0)


_CONTENT_RANGE = re.compile(r"\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*", re.IGNORECASE)


def range_mismatch(response: Any, start: int, end: int | None) -> str | None:
    """Why a 206 answer is not the bytes asked for (``start`` on, to ``end`` exclusive), or None.

    Its Content-Range must start at ``start`` and agree with its Content-Length: read as if it did, a
    server answering every Range from byte 0 would splice a shard. Shorter than asked is fine (the stream
    resumes where it ends); longer is read only as far as asked.
    """
    asked = f"bytes {start}-{'' if end is None else end - 1}"
    value = response.headers.get("content-range") or ""
    match = _CONTENT_RANGE.fullmatch(value)
    if match is None:
        return f"asked for {asked}, the 206 answer has no Content-Range naming one span ({value!r})"
    first, last, total = int(match[1]), int(match[2]), match[3]
    if first != start or last < first or (total != "*" and last >= int(total)):
        return (
            f"asked for {asked}, the server answered bytes {first}-{last} (its Content-Range {value!r}); "
            "refused: reading on would splice the object's bytes"
        )
    length = response.headers.get("content-length")
    if length is not None and length.strip().isdigit() and int(length) != last - first + 1:
        return f"asked for {asked}, its Content-Length {length} disagrees with its Content-Range {value!r}"
    return None


def if_range(validators: tuple[str | None, str | None, int | None] | None) -> str | None:
    """The If-Range value for a resume: a strong ETag, else Last-Modified, else none.

    A weak ETag (``W/"..."``) never matches in If-Range (RFC 9110 13.1.5), so sending one would make every
    resume a full 200 answer, refused as "object changed"; Last-Modified still lets the server resume.
    """
    if validators is None:
        return None
    etag, modified, _ = validators
    if etag and not etag.startswith("W/"):
        return etag
    return modified or None


def changed(before: tuple[Any, ...], now: tuple[Any, ...]) -> bool:
    return any(a is not None and b is not None and a != b for a, b in zip(before, now, strict=True))
