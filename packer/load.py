"""Turn a sample plan into bytes: read each member, apply media processing; runs in worker processes."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence

from shardstream.errors import RejectedInput, redact_url
from shardstream.io.localfiles import open_regular_fd
from shardstream.io.urls import is_remote

from .sample import Reject, Sample, SamplePlan
from .sources.remote import describe, fetch_all


class SwappedFile(OSError):
    """A folder's file is no longer the one listed (a link or another file in its place): not read."""

    def __init__(self, path: str) -> None:
        why = "changed since SOURCE was listed (another file or a link in its place); not read"
        super().__init__(errno.ESTALE, why, path)


def read_file(path: str, listed: tuple[int, int] | None = None) -> bytes:
    """The whole file, if a regular one (a FIFO or device: NotRegularFile, without blocking to open it).
    ``listed``: the (st_dev, st_ino) a folder listing saw; then no link is followed and the file must be
    that one (SwappedFile), so a swap after listing can neither hang the pack nor read outside SOURCE.
    os.read on a raw descriptor skips the buffered-reader setup open() pays per file."""
    try:
        fd = open_regular_fd(path, follow_symlinks=listed is None)
    except OSError as exc:
        if listed is not None and exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link: not what was listed
            raise SwappedFile(path) from exc
        raise
    try:
        found = os.fstat(fd)
        if listed is not None and (found.st_dev, found.st_ino) != listed:
            raise SwappedFile(path)
        size = found.st_size
        chunks = [os.read(fd, size or 65536)]
        # Keep reading until EOF: the file may have grown, or a read may come back short.
        while chunks[-1]:
            chunks.append(os.read(fd, 1 << 20))
        return b"".join(chunks) if len(chunks) > 2 else chunks[0]
    finally:
        os.close(fd)


def _read(path: str, listed: tuple[int, int] | None, fetched: dict[str, bytes | Exception]) -> bytes:
    if path not in fetched:
        return read_file(path, listed)
    found = fetched[path]
    if isinstance(found, Exception):
        raise found
    return found


def load_sample(
    plan: SamplePlan, media: object | None = None, fetched: dict[str, bytes | Exception] | None = None
) -> Sample | Reject:
    """Read one sample; any unusable member rejects the whole sample, so no sample is packed half.
    ``fetched`` holds the sample's media URLs, read beforehand with the rest of its batch."""
    members: list[tuple[str, bytes]] = []
    seen: set[str] = set()
    for member in plan.members:
        if member.data is not None and not member.media:
            ext, data = member.ext, bytes(member.data)
        else:
            where = member.path if member.data is None else plan.source  # embedded bytes: their record
            shown = f"{where} (field {member.origin!r})" if member.origin else where
            try:
                data = (
                    _read(member.path, member.listed, fetched or {})  # type: ignore[arg-type]
                    if member.data is None
                    else bytes(member.data)
                )
            except FileNotFoundError:
                return Reject(plan.source, f"missing file: {redact_url(str(shown))}", "missing")
            except OSError as exc:
                return Reject(plan.source, f"cannot read {shown}: {exc.strerror or exc}", "unreadable")
            except Exception as exc:  # a remote backend's own errors, at this boundary
                why = f"cannot read {redact_url(str(shown))}: {describe(exc)}"
                return Reject(plan.source, why, "unreadable")
            ext = member.ext
            if media is not None:
                from .media import process_media

                base, _, last = ext.rpartition(".")
                try:
                    new_last, data = process_media(last, data, media, source=shown)  # type: ignore[arg-type]
                except RejectedInput as exc:
                    return Reject(plan.source, exc.reason if exc.source in plan.source else str(exc), "media")
                ext = f"{base}.{new_last}" if base else new_last
        if ext in seen:
            return Reject(
                plan.source, f"two members map to {plan.key}.{ext} after processing", "member-clash"
            )
        seen.add(ext)
        members.append((ext, data))
    return Sample(key=plan.key, source=plan.source, members=tuple(members))


def load_batch(plans: Sequence[SamplePlan | Reject], media: object | None = None) -> list[Sample | Reject]:
    urls = [
        m.path
        for p in plans
        if not isinstance(p, Reject)
        for m in p.members
        if m.path is not None and is_remote(m.path)
    ]
    fetched = fetch_all(urls) if urls else {}
    return [p if isinstance(p, Reject) else load_sample(p, media, fetched) for p in plans]


def holds_its_bytes(plans: Sequence[SamplePlan | Reject]) -> bool:
    """Whether a batch needs no reading (every member's bytes in the plan, e.g. a table's): with no media
    processing either, loading it is cheaper here than pickling its bytes to a worker and back."""
    return all(isinstance(p, Reject) or all(m.path is None for m in p.members) for p in plans)
