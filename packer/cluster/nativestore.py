"""OUTDIR on S3 through obstore, the client the streamer reads with: multipart uploads, server-side copies.

Trade-off: only ``s3://`` (gs:// and az:// OUTDIRs stay on fsspec: untested here) and only in a
process that may use obstore (not forked from one that had: tokio does not survive fork); elsewhere, and
with ``$SHARDSTREAM_S3_CLIENT=s3fs``, OUTDIR stays on fsspec (``store.FsspecStore``), with the same bytes.
A finished file goes up in ``part_size`` pieces (5 MiB at least, S3's least), ``parts_in_flight`` at once:
an S3 multipart upload, which no reader sees until it completes (a killed upload leaves no object, only
parts that the bucket's lifecycle rule clears); a small file in one PUT. Failed requests are retried with
backoff and jitter (``retries``, ``backoff``, ``max_backoff`` of ``ObjectStoreOptions``); errors name the
URL, never a credential. A shard over 5 GiB cannot be committed this way (S3's CopyObject limit; the
commit copies each part's shard to its name): pack smaller shards, or set ``$SHARDSTREAM_S3_CLIENT=s3fs``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from shardstream.errors import PackError, ShardNotFoundError, ShardReadError, redact_url
from shardstream.io.objfailures import attempts
from shardstream.io.objstoreoptions import ObjectStoreOptions, split, store_for

from .scratch import scratch_for

_T = TypeVar("_T")
MIN_PART = 5 << 20  # S3 refuses a multipart upload's parts under 5 MiB (the last one excepted)


class NativeStore:
    """OUTDIR on S3 (``s3://bucket/prefix``), written natively: the interface of ``store.LocalStore``."""

    remote = True

    def __init__(self, url: str, options: ObjectStoreOptions | None = None) -> None:
        self.url = url.rstrip("/")
        self.shown = redact_url(self.url)
        self.options = options or ObjectStoreOptions()
        self.prefix = split(self.url)[1].strip("/")
        try:
            self._store = store_for(self.url, self.options)
        except Exception as exc:  # obstore missing, or a bucket it cannot address
            raise PackError(f"{self.shown}: cannot reach it natively ({exc})") from exc
        self.scratch = scratch_for(self.url)

    def _key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def _call(self, what: str, rel: str, call: Callable[[], _T]) -> _T:
        """``call()``, retried as the streamer's reads are (``objfailures.attempts``); a failure as a
        PackError naming the URL, an absent object as FileNotFoundError."""
        shown = f"{self.shown}/{rel}"
        try:
            return attempts(shown, 0, self.options, call)
        except ShardNotFoundError as exc:
            raise FileNotFoundError(shown) from exc
        except ShardReadError as exc:
            raise PackError(f"{shown}: cannot {what}: {exc.message}") from exc

    def local(self, rel: str) -> Path:
        return self.scratch / rel

    def read(self, rel: str) -> bytes | None:
        import obstore

        try:
            return self._call("read", rel, lambda: bytes(obstore.get(self._store, self._key(rel)).bytes()))
        except FileNotFoundError:
            return None

    def write(self, rel: str, data: bytes) -> None:
        import obstore

        self._call("write", rel, lambda: obstore.put(self._store, self._key(rel), data, use_multipart=False))

    def exists(self, rel: str) -> bool:
        import obstore

        try:
            self._call("check", rel, lambda: obstore.head(self._store, self._key(rel)))
        except FileNotFoundError:
            return False
        return True

    def put(self, source: Path, rel: str) -> None:
        """Upload a finished local file: in parts of ``part_size`` when larger, else in one PUT."""
        import obstore

        piece = max(self.options.part_size, MIN_PART)
        parts = source.stat().st_size > piece

        def upload() -> Any:
            return obstore.put(
                self._store,
                self._key(rel),
                source,
                use_multipart=parts,
                chunk_size=piece,
                max_concurrency=self.options.parts_in_flight,
            )

        self._call("upload", rel, upload)

    def publish(self, source: str, target: str) -> None:
        # A copy, not a move: the part's object stays until the commit ends, so a rerun can copy again.
        import obstore

        try:
            self._call(
                "copy", source, lambda: obstore.copy(self._store, self._key(source), self._key(target))
            )
        except FileNotFoundError as exc:
            why = f"{self.shown}/{source}: missing; delete that part's folder and run it again"
            raise PackError(why) from exc

    def settle(self) -> None:
        """Nothing to settle: S3 reads its own writes."""

    def fetch(self, rel: str) -> Path:
        """``rel`` downloaded into this machine's scratch (for the commit's key audit and rejects)."""
        local = self.scratch / "fetched" / rel
        local.parent.mkdir(parents=True, exist_ok=True)
        data = self.read(rel)
        if data is None:
            raise PackError(f"{self.shown}/{rel}: cannot download (not there)")
        local.write_bytes(data)
        return local

    def delete(self, rel: str) -> None:
        import obstore

        with contextlib.suppress(FileNotFoundError):
            self._call("delete", rel, lambda: obstore.delete(self._store, self._key(rel)))

    def _under(self, rel: str) -> list[str]:
        """Every object's key under ``rel/`` (all of OUTDIR for "")."""
        import obstore

        prefix = self._key(rel).rstrip("/") + "/" if rel or self.prefix else None

        def listed() -> list[str]:
            return [meta["path"] for batch in obstore.list(self._store, prefix) for meta in batch]

        return self._call("list", rel, listed)

    def names(self) -> list[str]:
        import obstore

        prefix = f"{self.prefix}/" if self.prefix else None
        found = self._call("list", "", lambda: obstore.list_with_delimiter(self._store, prefix))
        paths = [meta["path"] for meta in found["objects"]] + list(found["common_prefixes"])
        return sorted(str(path).rstrip("/").rsplit("/", 1)[-1] for path in paths)

    def remove(self, rel: str, *, first: str | None = None) -> None:
        """A folder: ``first`` (the file whose presence says the folder is live) before the rest."""
        import obstore

        if first is not None:
            self.delete(f"{rel}/{first}")
        keys = self._under(rel)
        if keys:
            self._call("delete", rel, lambda: obstore.delete(self._store, keys))
