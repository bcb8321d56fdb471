"""Where a pack in parts keeps its OUTDIR: a local folder (renames) or an object store (uploads,
server-side copies): s3:// natively through obstore (``nativestore.py``), the others through fsspec.
Parts always pack on local disk; only finished files cross to the store."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from shardstream.errors import PackError, redact_url
from shardstream.io.objstoreoptions import native
from shardstream.io.publish import fsync_dir, write_atomic
from shardstream.io.urls import is_remote, local_path, scheme_of

from .nativestore import NativeStore
from .scratch import scratch_for

__all__ = ["FsspecStore", "LocalStore", "NativeStore", "Store", "open_store"]


class LocalStore:
    """OUTDIR on this machine's (or a shared) filesystem: parts pack in place, publishing is a rename."""

    remote = False

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.shown = str(self.root)

    def local(self, rel: str) -> Path:
        return self.root / rel

    def read(self, rel: str) -> bytes | None:
        try:
            return (self.root / rel).read_bytes()
        except FileNotFoundError:
            return None

    def write(self, rel: str, data: bytes) -> None:
        (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.root / rel, data)

    def exists(self, rel: str) -> bool:
        return (self.root / rel).exists()

    def put(self, source: Path, rel: str) -> None:
        """Publish a finished local file under ``rel`` (it leaves ``source``)."""
        if source != self.root / rel:
            os.replace(source, self.root / rel)

    def publish(self, source: str, target: str) -> None:
        """Give a part's file its final name; finding it already there (a commit run again) is fine."""
        if (self.root / source).exists():
            os.replace(self.root / source, self.root / target)
        elif not (self.root / target).exists():
            raise PackError(
                f"{self.root / source}: missing, and not yet moved to {target} either: the part folder was "
                "changed after the part was done; delete that part's folder and run the part again"
            )

    def settle(self) -> None:
        fsync_dir(self.root)

    def fetch(self, rel: str) -> Path:
        """A local path holding ``rel``'s bytes (here: the file itself)."""
        return self.root / rel

    def delete(self, rel: str) -> None:
        (self.root / rel).unlink(missing_ok=True)

    def names(self) -> list[str]:
        return sorted(os.listdir(self.root)) if self.root.is_dir() else []

    def remove(self, rel: str, *, first: str | None = None) -> None:
        """A folder, in one rename first, so that no half of it is ever read as an unfinished state."""
        trash = self.root / f"{rel}.trash"
        if (self.root / rel).exists():
            os.replace(self.root / rel, trash)
        shutil.rmtree(trash, ignore_errors=True)


class FsspecStore:
    """OUTDIR on an object store: parts pack in local scratch and upload; the commit copies server-side."""

    remote = True

    def __init__(self, url: str) -> None:
        try:
            import fsspec
        except ImportError as exc:
            raise PackError("an OUTDIR URL needs fsspec: pip install 'shardstream[remote]'") from exc
        self.url = url.rstrip("/")
        self.shown = redact_url(self.url)
        try:
            self.fs, self.path = fsspec.core.url_to_fs(self.url)
        except (ImportError, ValueError) as exc:
            raise PackError(f"{self.shown}: no fsspec backend for it ({exc})") from exc
        self.scratch = scratch_for(self.url)  # a retry on this machine resumes from it

    def _key(self, rel: str) -> str:
        return f"{self.path}/{rel}"

    def local(self, rel: str) -> Path:
        return self.scratch / rel

    def _wrap(self, what: str, rel: str, exc: Exception) -> PackError:
        return PackError(f"{self.shown}/{rel}: cannot {what} ({type(exc).__name__}: {redact_url(str(exc))})")

    def read(self, rel: str) -> bytes | None:
        try:
            return self.fs.cat_file(self._key(rel))
        except FileNotFoundError:
            return None
        except Exception as exc:  # any backend's error, named with the URL at this boundary
            raise self._wrap("read", rel, exc) from exc

    def write(self, rel: str, data: bytes) -> None:
        try:
            self.fs.pipe_file(self._key(rel), data)  # one PUT: whole or absent
        except Exception as exc:
            raise self._wrap("write", rel, exc) from exc

    def exists(self, rel: str) -> bool:
        try:
            return bool(self.fs.exists(self._key(rel)))
        except Exception as exc:
            raise self._wrap("check", rel, exc) from exc

    def put(self, source: Path, rel: str) -> None:
        try:
            self.fs.put_file(str(source), self._key(rel))
        except Exception as exc:
            raise self._wrap("upload", rel, exc) from exc

    def publish(self, source: str, target: str) -> None:
        # A copy, not a move: the part's object stays until the commit ends, so a rerun can copy again.
        try:
            self.fs.copy(self._key(source), self._key(target))
        except FileNotFoundError as exc:
            why = f"{self.shown}/{source}: missing; delete that part's folder and run it again"
            raise PackError(why) from exc
        except Exception as exc:
            raise self._wrap("copy", source, exc) from exc

    def settle(self) -> None:
        self.fs.invalidate_cache()

    def fetch(self, rel: str) -> Path:
        """``rel`` downloaded into this machine's scratch (for the commit's key audit and rejects)."""
        local = self.scratch / "fetched" / rel
        local.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.fs.get_file(self._key(rel), str(local))
        except Exception as exc:
            raise self._wrap("download", rel, exc) from exc
        return local

    def delete(self, rel: str) -> None:
        try:
            self.fs.rm_file(self._key(rel))
        except FileNotFoundError:
            pass
        except Exception as exc:
            raise self._wrap("delete", rel, exc) from exc

    def names(self) -> list[str]:
        try:
            found = self.fs.ls(self.path, detail=False, refresh=True)
        except FileNotFoundError:
            return []
        except Exception as exc:
            raise self._wrap("list", "", exc) from exc
        return sorted(str(name).rstrip("/").rsplit("/", 1)[-1] for name in found)

    def remove(self, rel: str, *, first: str | None = None) -> None:
        """A folder: ``first`` (the file whose presence says the folder is live) before the rest."""
        if first is not None:
            self.delete(f"{rel}/{first}")
        try:
            if self.fs.exists(self._key(rel)):
                self.fs.rm(self._key(rel), recursive=True)
        except FileNotFoundError:
            pass
        except Exception as exc:
            raise self._wrap("delete", rel, exc) from exc
        self.fs.invalidate_cache()


Store = LocalStore | FsspecStore | NativeStore


def open_store(outdir: str | os.PathLike[str] | Store) -> Store:
    """OUTDIR's store: s3:// through obstore where this process may use it, another URL (gs://, ...)
    through fsspec, else the local folder."""
    if isinstance(outdir, (LocalStore, FsspecStore, NativeStore)):
        return outdir
    text = os.fspath(outdir)
    if not is_remote(text):
        return LocalStore(Path(local_path(text)))
    # Native writes are S3's for now (tested against moto); gs:// and az:// OUTDIRs stay on fsspec.
    return NativeStore(text) if scheme_of(text) == "s3" and native("s3") else FsspecStore(text)
