"""obstore's failures as shardstream's: classified (retry, or an error that says the fix) and retried.

Trade-off: a failure is classified by its type and, where obstore gives none, by the HTTP status in its
message, so a backend whose messages name no status is retried as a passing failure (up to ``retries``).
One rule for every request to an object store: the streamer's reads and the packer's writes.
"""

from __future__ import annotations

import os
import random
import re
import time
from typing import Any
from urllib.parse import urlparse

from shardstream.errors import ShardNotFoundError, ShardReadError, redact_url

from .iostats import IO
from .objstoreoptions import ObjectStoreOptions

__all__ = [
    "DENIED",
    "Retry",
    "attempts",
    "changed",
    "checked_span",
    "classified",
    "denied",
    "reason",
    "status_of",
    "wrong_span",
]

STATUS = re.compile(r"status code: (\d{3})")
# obstore's own checks of a ranged answer (object_store's GetResultError): another span, or no span at all
WRONG_SPAN = re.compile(
    r"Requested \d+\.\.\d+, got \d+\.\.\d+|non-partial response when range requested|"
    r"Content-Range header not present"
)
DENIED = (
    "access denied (HTTP 401/403): check the credentials in the environment (AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY; for AWS_PROFILE set SHARDSTREAM_S3_CLIENT=s3fs), the bucket's policy and "
    "the region (AWS_DEFAULT_REGION)"
)
# What a refusal says by scheme: where that store's credentials come from.
DENIED_BY_SCHEME = {
    "s3": DENIED,
    "gs": "access denied (HTTP 401/403): check the credentials in the environment "
    "(GOOGLE_APPLICATION_CREDENTIALS or GOOGLE_SERVICE_ACCOUNT naming a key file, else the machine's "
    "service account) and the bucket's IAM policy",
    "az": "access denied (HTTP 401/403): check the credentials in the environment "
    "(AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_KEY, a client secret, "
    "or the machine's managed identity) and the container's access policy",
}
# Variables whose values must never show in a message (obstore's errors may echo a signed URL or header).
SECRETS = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_ACCESS_KEY",
    "AZURE_STORAGE_SAS_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_SERVICE_ACCOUNT_KEY",
)


class Retry(Exception):
    """A failure worth another attempt (5xx, 429/SlowDown, a broken connection, a short body)."""


def reason(exc: BaseException) -> str:
    """The backend's first line, without URLs' secrets and without any credential of the environment."""
    text = str(exc).strip()
    first = redact_url(text.splitlines()[0]) if text else type(exc).__name__
    for name in SECRETS:
        secret = os.environ.get(name)
        if secret:
            first = first.replace(secret, "***")
    return first


def denied(shown: str) -> str:
    """A refusal's message for the store ``shown`` is on: where its credentials come from."""
    return DENIED_BY_SCHEME.get(urlparse(shown).scheme, DENIED)


def status_of(exc: BaseException) -> int | None:
    """The HTTP status obstore's message names, if any."""
    found = STATUS.search(str(exc))
    return int(found.group(1)) if found else None


def classified(exc: Exception, shown: str, offset: int | None) -> Exception:
    """obstore's error as ours: a ShardReadError that says the fix, or ``Retry`` for a passing failure."""
    from obstore import exceptions as obstore_errors

    if isinstance(exc, FileNotFoundError):
        return ShardNotFoundError("not found (no such object, or no such bucket)", url=shown)
    refused_here = isinstance(exc, (ValueError, TypeError, OverflowError))
    if refused_here and not isinstance(exc, obstore_errors.BaseError):
        # obstore refused the arguments before any request (a range off 0..2^64): asking again cannot help
        why = f"the request could not be made ({reason(exc)}): a damaged or hostile offset?"
        return ShardReadError(why, url=shown, offset=offset)
    if isinstance(exc, obstore_errors.PreconditionError):
        return changed(shown, offset)
    if isinstance(exc, (obstore_errors.PermissionDeniedError, obstore_errors.UnauthenticatedError)):
        return ShardReadError(denied(shown), url=shown)
    if (found := WRONG_SPAN.search(str(exc))) is not None:
        return wrong_span(shown, offset, found.group(0))
    status = status_of(exc)
    if status in (401, 403):
        return ShardReadError(denied(shown), url=shown)
    if status == 416:
        return ShardReadError("offset is past the end of the object", url=shown, offset=offset)
    if status is not None and 400 <= status < 500 and status not in (408, 429):
        return ShardReadError(f"refused: {reason(exc)}", url=shown, offset=offset)
    return Retry(reason(exc))


def changed(shown: str, offset: int | None) -> ShardReadError:
    return ShardReadError(
        "the object changed while it was read (its ETag differs from the one at open); its shard cannot "
        "be read on without mixing two versions: read it again",
        url=shown,
        offset=offset,
    )


def wrong_span(shown: str, offset: int | None, what: str) -> ShardReadError:
    return ShardReadError(
        f"the store answered another span than the range asked for ({what}); its bytes are not used and "
        "not asked for again: check the endpoint (a proxy or server that ignores or rewrites Range)",
        url=shown,
        offset=offset,
    )


def attempts(shown: str, offset: int, options: ObjectStoreOptions, call: Any) -> Any:
    """``call()``, retried on passing failures with backoff and jitter; then a ShardReadError."""
    failures = 0
    while True:
        try:
            return call()
        except ShardReadError:
            raise
        except Exception as exc:
            failure = exc if isinstance(exc, Retry) else classified(exc, shown, offset)
            if not isinstance(failure, Retry):
                raise failure from exc
            failures += 1
            IO.retries += 1
            if failures > options.retries:
                message = f"{failure}; gave up after {options.retries} retries"
                raise ShardReadError(message, url=shown, offset=offset) from exc
            wait = min(options.max_backoff, options.backoff * 2 ** (failures - 1))
            time.sleep(wait * random.uniform(0.5, 1.5))


def checked_span(answer: Any, start: int, end: int, shown: str) -> None:
    """A ranged GET's answer must be the span asked for, [start, end) cut at the object's end."""
    got, want = tuple(answer.range), (start, min(end, answer.meta["size"]))
    if got != want:  # obstore checks Content-Range first; this holds should it stop
        raise wrong_span(shown, start, f"bytes {got[0]}..{got[1]} for {want[0]}..{want[1]}")
