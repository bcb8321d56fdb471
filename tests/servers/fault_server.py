"""A small file server that misbehaves on request (in-process, so faults are exact but it is no nginx)."""

from __future__ import annotations

import contextlib
import random
import socket
import threading
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from tests.servers.common import HOST, LocalServer, Request
from tests.servers.faults import BodyFaults, Faults, changed_byte, matches, take
from tests.servers.handler import (
    FaultHandler,
    FaultHTTPServer,
    close_connection,
    request_entry,
    send_body,
    send_head,
    send_simple,
)
from tests.servers.ranges import conditional_status, validators, wanted_range

# What _route answers without serving the file: (status, fault, headers).
Early = tuple[int, str | None, dict[str, str] | None]


class FaultServer(LocalServer):
    """Serve files under ``root`` on 127.0.0.1 with Range/ETag/Last-Modified, and inject faults.

    ``with FaultServer(root) as srv:``; ``srv.url``; ``srv.set_faults(drop_after=[1000])`` or
    ``srv.faults = Faults(...)``; ``srv.requests`` / ``srv.request_count`` / ``srv.errors``."""

    def __init__(self, root: Path, *, faults: Faults | None = None, chunk_size: int = 64 * 1024) -> None:
        self.root = Path(root).resolve()
        self.chunk_size = chunk_size
        self.port: int | None = None
        self.errors: list[str] = []  # tracebacks of unexpected handler exceptions (tests assert it's empty)
        self._lock = threading.RLock()
        self._faults = Faults()
        self._rng = random.Random(0)
        self._log: list[Request] = []
        self._hits: Counter[str] = Counter()
        self._changes: Counter[str] = Counter()
        self._stopping = threading.Event()
        self._httpd: FaultHTTPServer | None = None
        self._thread: threading.Thread | None = None
        if faults is not None:
            self.faults = faults

    # --- configuration
    @property
    def faults(self) -> Faults:
        """The faults in force; its lists shrink as requests consume them."""
        return self._faults

    @faults.setter
    def faults(self, faults: Faults) -> None:
        with self._lock:
            self._faults = faults.copy()
            self._rng = random.Random(faults.seed)
            self._hits.clear()  # change_after counts from here

    def set_faults(self, **kwargs: object) -> None:
        """Replace the faults: ``set_faults(status_codes=[503, 429], retry_after=1)``."""
        self.faults = Faults(**kwargs)

    def clear_faults(self) -> None:
        self.faults = Faults()

    def change(self, path: str) -> None:
        """Change the object at ``path`` now: the next responses carry different bytes and a new ETag."""
        with self._lock:
            self._changes["/" + path.lstrip("/")] += 1

    # --- request log
    @property
    def requests(self) -> list[Request]:
        return self._logged()

    def _logged(self) -> list[Request]:
        with self._lock:
            return list(self._log)

    def requests_for(self, path: str) -> list[Request]:
        path = "/" + path.lstrip("/")
        return [r for r in self.requests if r.path == path]

    def clear_log(self) -> None:
        with self._lock:
            self._log.clear()

    def _record(self, entry: Request) -> None:
        """Log a request once its status and fault are known, before its response goes out."""
        with self._lock:
            self._log.append(entry)

    # --- life cycle
    @property
    def running(self) -> bool:
        return self._httpd is not None

    def start(self) -> FaultServer:
        """Listen (on a free port the first time, on the same one after ``stop()``) in a daemon thread."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = FaultHTTPServer(self, (HOST, self.port or 0))
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"FaultServer:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop now: stalls are cut short and open connections shut, so this takes well under a second."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        with httpd.conn_lock:
            connections = list(httpd.connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- serving
    def _resolve(self, path: str) -> Path | None:
        try:
            file = (self.root / path.lstrip("/")).resolve()
        except (OSError, RuntimeError, ValueError):
            return None
        if file != self.root and self.root not in file.parents:
            return None
        return file if file.is_file() else None

    def _handle(self, h: FaultHandler, *, head: bool) -> None:
        entry, query = request_entry(h, head=head)
        early, file, version, matched = self._route(entry.path, query, h.headers)
        if early is not None:
            return self._simple(h, entry, early[0], early[1], head, early[2])
        try:
            st = file.stat()
        except OSError:
            return self._simple(h, entry, 404, None, head)
        size = st.st_size
        etag, last_modified, mtime = validators(st, version)
        headers = {"ETag": etag, "Last-Modified": last_modified, "Accept-Ranges": "bytes"}
        if self._faults.no_etag:
            del headers["ETag"]
        code = conditional_status(h.headers, etag, mtime)
        if code is not None:
            return self._simple(h, entry, code, None, head or code == 304, headers)
        asked: Mapping[str, str] = h.headers
        if self._faults.ignore_if_range:  # as a server that does not implement If-Range
            asked = {"Range": h.headers["Range"]} if h.headers.get("Range") else {}
        if self._faults.ignore_range:  # as a server that does not implement Range at all
            asked = {}
        wanted = wanted_range(asked, size, etag, last_modified)
        if wanted == "unsatisfiable":
            return self._simple(h, entry, 416, None, head, {**headers, "Content-Range": f"bytes */{size}"})
        start, end = wanted if wanted is not None else (0, size)
        if wanted is not None and self._faults.max_range is not None:
            end = min(end, start + self._faults.max_range)
        status = 206 if wanted is not None else 200
        if wanted is not None:
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"

        length = end - start
        faults = BodyFaults() if head else self._body_faults(matched, length)
        headers["Content-Type"] = "application/octet-stream"
        if self._faults.no_length:  # HTTP/1.0 style: the end of the body is the end of the connection
            h.close_connection = True
        else:
            headers["Content-Length"] = str(length + (faults.truncate or 0))
        entry.status, entry.fault = status, faults.name
        self._record(entry)
        if not send_head(h, status, headers) or head:
            return None
        flip = changed_byte(version, size, faults.change_offset)
        if send_body(h, entry, file, start, faults.cut(length), self.chunk_size, flip):
            self._end_faulty(h, entry, faults)
        return None

    def _route(
        self, path: str, query: str, asked: Mapping[str, str]
    ) -> tuple[Early | None, Path | None, int, bool]:
        """Under the lock: an early answer, or None; the file, its change version, whether faults apply."""
        early: Early | None = None  # decided under the lock, answered outside it
        with self._lock:
            f = self._faults
            matched = f.only is None or matches(path, f.only)
            file = self._resolve(path)
            version = self._changes[path]
            required = f.require_headers or {}
            if any(asked.get(name) != value for name, value in required.items()):
                early = (401, "unauthorized", {"WWW-Authenticate": 'Bearer realm="shardstream-test"'})
            elif f.redirect and path.startswith("/r/"):
                location = path[2:] + (f"?{query}" if query else "")
                early = (302, "redirect", {"Location": location})
            elif matches(path, f.forbid):
                early = (403, "forbid", None)
            elif matched and f.status_codes:
                retry = None if f.retry_after is None else {"Retry-After": str(f.retry_after)}
                early = (f.status_codes.pop(0), "status", retry)
            elif file is None:
                early = (404, None, None)
            elif matched:
                self._hits[path] += 1
                if f.change_after is not None and self._hits[path] > f.change_after:
                    version += 1
        return early, file, version, matched

    def _body_faults(self, matched: bool, length: int) -> BodyFaults:
        """Under the lock: take this GET's body faults (consuming list entries) and the settings in force."""
        drop = stall = truncate = None
        with self._lock:
            f = self._faults
            if matched:
                drop, stall, truncate = take(f.drop_after), take(f.stall_after), take(f.truncate)
                if drop is None and f.drop_probability and self._rng.random() < f.drop_probability:
                    drop = self._rng.randrange(max(1, length))
            return BodyFaults(drop, stall, truncate, f.stall_seconds, f.reset, f.change_offset)

    def _end_faulty(self, h: FaultHandler, entry: Request, faults: BodyFaults) -> None:
        """After the body: a stall waits (cut short on stop) then closes; a drop or truncate closes now."""
        if entry.fault == "stall":
            self._stopping.wait(faults.stall_seconds)
            close_connection(h, reset=False)
        elif entry.fault is not None:  # drop or truncate
            close_connection(h, reset=faults.reset and entry.fault == "drop")

    def _simple(
        self,
        h: FaultHandler,
        entry: Request,
        code: int,
        fault: str | None,
        head: bool,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Log, then answer with a short text body (none for HEAD, 304)."""
        entry.status, entry.fault = code, fault
        self._record(entry)
        send_simple(h, entry, code, head, headers)
