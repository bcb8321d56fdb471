"""The system's nginx serving a folder on 127.0.0.1, as in production (a real process: slower to start)."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from tests.servers.common import HOST, LocalServer, Request, free_port
from tests.servers.nginx_config import (
    NGINX_INSTALL_HINT,
    READY_PATH,
    die_with_parent,
    find_nginx,
    render_config,
)
from tests.servers.tls import TLSFiles, make_tls_files


class NginxServer(LocalServer):
    """nginx serving ``root`` on 127.0.0.1: ``url`` (http), plus ``https_url`` and ``ca_bundle`` when
    ``https=True`` (both ports live in one nginx). ``extra_config`` goes into the ``server {}`` block
    (e.g. ``"limit_rate 200k;"``). Use it as a context manager; ``stop()`` / ``start()`` restart it on the
    same ports, keeping the access log."""

    def __init__(
        self,
        root: Path,
        *,
        https: bool = False,
        extra_config: str = "",
        binary: str | None = None,
        startup_timeout: float = 10.0,
        stop_timeout: float = 5.0,
    ) -> None:
        self.binary = binary if binary is not None else find_nginx()
        if not (os.path.isfile(self.binary) and os.access(self.binary, os.X_OK)):
            raise RuntimeError(f"{self.binary} is not an executable. {NGINX_INSTALL_HINT}")
        self.root = Path(root).resolve()
        self.https = https
        self.extra_config = extra_config
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.prefix: Path | None = None
        self.port: int | None = None
        self.https_port: int | None = None
        self.tls: TLSFiles | None = None
        self._proc: subprocess.Popen | None = None
        self._started_once = False
        self._error_log_flag = True

    # --- addresses and files
    @property
    def https_url(self) -> str:
        if not self.https:
            raise AttributeError("https_url: this NginxServer was made with https=False")
        return f"https://{HOST}:{self.https_port}"

    @property
    def ca_bundle(self) -> Path:
        if self.tls is None:
            raise AttributeError("ca_bundle: this NginxServer was made with https=False")
        return self.tls.ca_cert

    @property
    def access_log(self) -> Path:
        return self._prefix() / "access.log"

    @property
    def error_log(self) -> Path:
        return self._prefix() / "error.log"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _prefix(self) -> Path:
        if self.prefix is None:
            self.prefix = Path(tempfile.mkdtemp(prefix="shardstream-nginx-"))
            (self.prefix / "tmp").mkdir()
        return self.prefix

    # --- request log
    def requests(self) -> list[Request]:
        """The access log so far (nginx writes a line just after a response is sent: see wait_requests)."""
        return self._logged()

    def _logged(self) -> list[Request]:
        if self.prefix is None or not self.access_log.exists():
            return []
        out = []
        for line in self.access_log.read_text(errors="replace").splitlines():
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line being written right now
            out.append(Request(rec["method"], rec["path"], rec["range"] or None, rec["status"], rec["bytes"]))
        return out

    # --- life cycle
    def _write_config(self) -> Path:
        prefix = self._prefix()
        if self.https and self.tls is None:
            self.tls = make_tls_files(prefix / "tls")
        conf = render_config(prefix, self.root, self.port, self.https_port, self.tls, self.extra_config)
        path = prefix / "nginx.conf"
        path.write_text(conf)
        return path

    def start(self) -> NginxServer:
        """Start nginx (ports are picked on the first start and kept) and wait until it answers."""
        if self.running:
            return self
        if not self.root.is_dir():
            raise FileNotFoundError(f"nginx root {self.root} is not a folder")
        attempts = 1 if self._started_once else 4  # a restart keeps its ports, its URL must not change
        error = ""
        for _ in range(attempts):
            if not self._started_once:
                self.port = free_port()
                self.https_port = free_port() if self.https else None
                while self.https and self.https_port == self.port:
                    self.https_port = free_port()
            ok, error = self._launch()
            if ok:
                self._started_once = True
                return self
            if "Address already in use" not in error:
                break
        raise RuntimeError(f"nginx did not start ({self.binary}, config {self.prefix}/nginx.conf):\n{error}")

    def _launch(self) -> tuple[bool, str]:
        conf = self._write_config()
        prefix = self._prefix()
        logs = [prefix / "stderr.log", prefix / "error.log"]
        seen = [log.stat().st_size if log.exists() else 0 for log in logs]
        args = [self.binary, "-c", str(conf), "-p", str(prefix)]
        if self._error_log_flag:  # -e (nginx >= 1.19.5): never touch the built-in /var/log/nginx path
            args += ["-e", str(prefix / "error.log")]
        self._spawn(args, logs[0])
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            if self._ready():
                return True, ""
            time.sleep(0.05)
        self._terminate()
        text = [_read_from(log, start) for log, start in zip(logs, seen, strict=True)]
        error = "\n".join(t for t in text if t.strip()) or f"no answer within {self.startup_timeout} s"
        if self._error_log_flag and "invalid option" in error:  # an nginx older than 1.19.5
            self._error_log_flag = False
            return self._launch()
        return False, error

    def _spawn(self, args: list[str], stderr_log: Path) -> None:
        main_thread = threading.current_thread() is threading.main_thread()
        stderr = open(stderr_log, "ab")  # noqa: SIM115 - handed to the child
        try:
            self._proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                start_new_session=True,  # its own process group, so a kill reaches the worker too
                preexec_fn=die_with_parent() if main_thread else None,
            )
        finally:
            stderr.close()

    def _ready(self) -> bool:
        conn = http.client.HTTPConnection(HOST, self.port, timeout=0.5)
        try:
            conn.request("GET", READY_PATH)
            return conn.getresponse().status == 204
        except OSError:
            return False
        finally:
            conn.close()

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)  # nginx's fast shutdown: the master ends its worker, then itself
        try:
            proc.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            # Kill the master and its worker together (the group we started), or the worker keeps the port.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=self.stop_timeout)

    def stop(self) -> None:
        """Stop nginx (SIGTERM, then SIGKILL to its process group); ``start()`` brings it back."""
        self._terminate()

    def close(self) -> None:
        self._terminate()
        if self.prefix is not None:
            shutil.rmtree(self.prefix, ignore_errors=True)
            self.prefix = None

    def __enter__(self) -> NginxServer:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_from(log: Path, start: int) -> str:
    """The last 3000 bytes a log gained since it was ``start`` bytes long ("" if it can't be read)."""
    with contextlib.suppress(OSError), open(log, "rb") as fh:
        fh.seek(start)
        return fh.read()[-3000:].decode(errors="replace")
    return ""


def nginx(root: Path, *, https: bool = False, **kwargs: object) -> NginxServer:
    """``with nginx(folder) as srv: httpx.get(srv.url + "/file")`` (the server is its own context manager)."""
    return NginxServer(root, https=https, **kwargs)
