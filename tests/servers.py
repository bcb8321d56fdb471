"""Real HTTP(S) servers for the HTTP tests: nginx, and a small fault-injecting server.

Both bind only to 127.0.0.1 on a free port and stop themselves when their ``with`` block ends.

``nginx(root, https=False)`` runs the system's nginx (Debian ``nginx-light``) on a config written into a
temp dir, serving ``root`` statically: Range, ETag, Last-Modified, If-Range, exactly as in production.
With ``https=True`` it also serves TLS with a throwaway CA made here (``ca_bundle``).

``FaultServer(root)`` is a ``ThreadingHTTPServer`` in a daemon thread that serves files with Range, ETag,
Last-Modified and the conditional headers, and misbehaves on request: ``server.set_faults(drop_after=[N])``
and the other fields of :class:`Faults`. Both servers log every request as a :class:`Request`.

Test modules use the context managers directly, or the fixtures at the bottom through
``pytest_plugins = ["tests.servers"]``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import email.utils
import fnmatch
import grp
import http.client
import http.server
import ipaddress
import json
import os
import pwd
import random
import shutil
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

HOST = "127.0.0.1"
NGINX_CANDIDATES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")
NGINX_INSTALL_HINT = (
    "nginx is needed by the HTTP tests and was not found (looked for $SHARDSTREAM_NGINX, `nginx` on PATH, "
    + ", ".join(NGINX_CANDIDATES)
    + "): install it with `apt-get install nginx-light` (bash .ci/setup does this)"
)
MAX_STALL_SECONDS = 5.0
READY_PATH = "/__shardstream_ready__"


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


@dataclass
class Request:
    """One request as a server saw it. ``range`` is the Range header or None; ``bytes_sent`` counts body
    bytes; ``fault`` names the fault applied (``drop``, ``stall``, ``truncate``, ``status``, ``forbid``,
    ``redirect``) or is None. ``headers`` (FaultServer only) holds the request headers, lower-cased names."""

    method: str
    path: str
    range: str | None
    status: int
    bytes_sent: int = 0
    fault: str | None = None
    headers: dict[str, str] = field(default_factory=dict, repr=False)


def _wait_for(count: int, get: Callable[[], list[Request]], timeout: float) -> list[Request]:
    deadline = time.monotonic() + timeout
    while True:
        got = get()
        if len(got) >= count or time.monotonic() >= deadline:
            return got
        time.sleep(0.01)


# --------------------------------------------------------------------------------------------- TLS


@dataclass(frozen=True)
class TLSFiles:
    ca_cert: Path  # PEM of the throwaway CA: what a client must trust
    cert: Path  # PEM of the server certificate (127.0.0.1 and localhost), signed by the CA
    key: Path  # PEM of the server's private key (unencrypted)


def make_tls_files(folder: Path, hosts: Sequence[str] = ("127.0.0.1", "localhost")) -> TLSFiles:
    """Write a throwaway CA and a server certificate for ``hosts`` (IPs become IP SANs) signed by it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)
    start, end = now - dt.timedelta(days=1), now + dt.timedelta(days=30)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "shardstream test CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    files = TLSFiles(folder / "ca.pem", folder / "server.pem", folder / "server.key")
    files.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    files.key.chmod(0o600)
    return files


# ------------------------------------------------------------------------------------------- nginx


def _die_with_parent():
    """A preexec_fn asking Linux to SIGTERM nginx's master if this process dies without stopping it (a
    pytest killed with SIGKILL). Only used from the main thread: the signal follows the forking thread."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)

    return preexec


def find_nginx() -> str:
    """The nginx binary, or a RuntimeError that says how to install it (never a skip: CI must run these)."""
    candidates = [os.environ.get("SHARDSTREAM_NGINX"), shutil.which("nginx"), *NGINX_CANDIDATES]
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeError(NGINX_INSTALL_HINT)


_NGINX_CONF = """\
daemon off;
master_process on;
worker_processes 1;
{user}pid {prefix}/nginx.pid;
lock_file {prefix}/nginx.lock;
error_log {prefix}/error.log notice;
events {{
    worker_connections 256;
}}
http {{
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    default_type application/octet-stream;
    log_format shardstream escape=json
        '{{"method":"$request_method","path":"$uri","range":"$http_range",'
        '"status":$status,"bytes":$body_bytes_sent}}';
    access_log {prefix}/access.log shardstream;
    keepalive_timeout 10s;
    server_tokens off;
    sendfile on;  # as Debian's stock nginx.conf: file pages go to the socket without a copy in nginx
    tcp_nopush on;
    server {{
        listen {host}:{port};
{tls}        root {root};
        location = {ready} {{
            access_log off;
            return 204;
        }}
{extra}
    }}
}}
"""


class NginxServer:
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
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

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

    @property
    def request_count(self) -> int:
        return len(self.requests())

    def wait_requests(self, count: int, timeout: float = 2.0) -> list[Request]:
        """The log once it holds at least ``count`` requests, or as it is after ``timeout`` seconds."""
        return _wait_for(count, self.requests, timeout)

    # --- life cycle
    def _write_config(self) -> Path:
        prefix = self._prefix()
        user = ""
        if os.geteuid() == 0:  # workers would drop to `nobody`, which can't read pytest's 0700 temp dirs
            user = f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};\n"
        tls = ""
        if self.https:
            if self.tls is None:
                self.tls = make_tls_files(prefix / "tls")
            tls = (
                f"        listen {HOST}:{self.https_port} ssl;\n"
                f"        ssl_certificate {self.tls.cert};\n"
                f"        ssl_certificate_key {self.tls.key};\n"
                "        ssl_protocols TLSv1.2 TLSv1.3;\n"
            )
        conf = _NGINX_CONF.format(
            user=user,
            prefix=prefix,
            host=HOST,
            port=self.port,
            tls=tls,
            root=self.root,
            ready=READY_PATH,
            extra=self.extra_config,
        )
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
        main_thread = threading.current_thread() is threading.main_thread()
        stderr = open(logs[0], "ab")  # noqa: SIM115 - handed to the child
        try:
            self._proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                start_new_session=True,  # its own process group, so a kill reaches the worker too
                preexec_fn=_die_with_parent() if main_thread else None,
            )
        finally:
            stderr.close()
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            if self._ready():
                return True, ""
            time.sleep(0.05)
        self._terminate()
        text = []
        for log, start in zip(logs, seen, strict=True):
            with contextlib.suppress(OSError), open(log, "rb") as fh:
                fh.seek(start)
                text.append(fh.read()[-3000:].decode(errors="replace"))
        error = "\n".join(t for t in text if t.strip()) or f"no answer within {self.startup_timeout} s"
        if self._error_log_flag and "invalid option" in error:  # an nginx older than 1.19.5
            self._error_log_flag = False
            return self._launch()
        return False, error

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


def nginx(root: Path, *, https: bool = False, **kwargs: object) -> NginxServer:
    """``with nginx(folder) as srv: httpx.get(srv.url + "/file")`` (the server is its own context manager)."""
    return NginxServer(root, https=https, **kwargs)


# ------------------------------------------------------------------------------------ fault server

IntOrList = int | Sequence[int | None] | None


@dataclass
class Faults:
    """What the FaultServer does wrong. Body faults (``drop_after``, ``stall_after``, ``truncate``) take an
    int (every GET that sends a body) or a list (one value per such GET, in order; None = no fault for that
    one; an empty list = no more faults). Counts are body bytes of *that* response, not file offsets.

    ``only``: fnmatch patterns (``"*.tar"``) of paths the faults apply to; None = all paths. ``forbid`` and
    ``redirect`` ignore ``only``.
    """

    only: str | Sequence[str] | None = None
    status_codes: Sequence[int] = ()  # the next len() matching requests get these codes, then normal
    retry_after: int | str | None = None  # Retry-After header sent with those codes
    drop_after: IntOrList = None  # send N body bytes then close the connection (FIN; RST if reset=True)
    drop_probability: float = 0.0  # else drop each GET body at a random byte with this probability...
    seed: int = 0  # ...from random.Random(seed), seeded when the faults are set
    reset: bool = False  # drop with a TCP RST (SO_LINGER 0) instead of a clean FIN
    stall_after: IntOrList = None  # send N body bytes, go silent for stall_seconds, then close
    stall_seconds: float = 1.0  # at most MAX_STALL_SECONDS (5 s); cut short when the server stops
    truncate: IntOrList = None  # announce Content-Length N bytes larger than the body, send it, close
    change_after: int | None = None  # after this many requests for a path, serve changed bytes + new ETag
    change_offset: int | None = None  # the byte flipped by a change (default: the middle of the file)
    forbid: str | Sequence[str] = ()  # fnmatch patterns of paths answered with 403
    redirect: bool = True  # /r/<path> answers 302 with Location: /<path>

    def __post_init__(self) -> None:
        if not 0 <= self.stall_seconds <= MAX_STALL_SECONDS:
            raise ValueError(f"stall_seconds must be within [0, {MAX_STALL_SECONDS}]")
        if not 0.0 <= self.drop_probability <= 1.0:
            raise ValueError("drop_probability must be within [0, 1]")
        if any(not 100 <= code <= 599 for code in self.status_codes):
            raise ValueError(f"status codes must be HTTP codes: {self.status_codes}")
        if self.change_after is not None and self.change_after < 0:
            raise ValueError("change_after must be >= 0")

    def copy(self) -> Faults:
        """A copy whose lists the server may consume without touching the caller's."""

        def own(value):
            return list(value) if isinstance(value, (list, tuple)) else value

        return replace(
            self,
            status_codes=list(self.status_codes),
            drop_after=own(self.drop_after),
            stall_after=own(self.stall_after),
            truncate=own(self.truncate),
            only=[self.only] if isinstance(self.only, str) else own(self.only),
            forbid=[self.forbid] if isinstance(self.forbid, str) else list(self.forbid),
        )


def _take(spec: IntOrList) -> int | None:
    """The fault value for one request: an int applies every time, a list is consumed one per request."""
    if spec is None or isinstance(spec, int):
        return spec
    return spec.pop(0) if spec else None


def _matches(path: str, patterns: Sequence[str] | None) -> bool:
    bare = path.lstrip("/")
    return any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(bare, p) for p in patterns or ())


def parse_range(header: str | None, size: int) -> tuple[int, int] | str | None:
    """``(start, end_exclusive)``, ``"unsatisfiable"`` (416), or None (200, the whole file), decided as
    nginx 1.22's range filter decides: ``bytes=`` in any case, spaces allowed around numbers, a bad spec or
    ``a > b`` is 416, ranges starting at or past the end are dropped, an empty file answers 200 to
    ``0-``. Several ranges answer 200 here (nginx sends multipart/byteranges)."""
    if not header or len(header) < 7 or header[:6].lower() != "bytes=":
        return None
    text, i, ranges = header + "\0", 6, []

    def number(i: int) -> tuple[int, int] | None:
        j = i
        while text[j].isascii() and text[j].isdigit():
            j += 1
        return (int(text[i:j]), j) if j > i else None

    def spaces(i: int) -> int:
        while text[i] == " ":
            i += 1
        return i

    while True:
        i = spaces(i)
        suffix = text[i] == "-"
        if suffix:
            i += 1
        else:
            got = number(i)
            if got is None:
                return "unsatisfiable"
            start, i = got
            i = spaces(i)
            if text[i] != "-":
                return "unsatisfiable"
            i = spaces(i + 1)
        if not suffix and text[i] in ",\0":
            end = size
        else:
            got = number(i)
            if got is None:
                return "unsatisfiable"
            end, i = got
            i = spaces(i)
            if text[i] not in ",\0":
                return "unsatisfiable"
            if suffix:
                start, end = (size - end if end < size else 0), size
            elif start > end:
                return "unsatisfiable"
            else:
                end = min(end + 1, size)
        if start < end:
            ranges.append((start, end))
        elif start == 0:
            return None
        if text[i] != ",":
            break
        i += 1
    if not ranges:
        return "unsatisfiable"
    return ranges[0] if len(ranges) == 1 else None


def _etag_list(header: str) -> list[str]:
    return [t.strip() for t in header.split(",") if t.strip()]


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, owner: FaultServer, address: tuple[str, int]) -> None:
        self.owner = owner
        self.connections: set[socket.socket] = set()
        self.conn_lock = threading.Lock()
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), a reverse DNS lookup that can hang: not here.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = HOST, self.server_address[1]

    def process_request(self, request, client_address):
        with self.conn_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self.conn_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request, client_address):
        error = sys.exc_info()[1]
        if isinstance(error, (OSError, TimeoutError)):
            return  # the client went away, a broken pipe, a reset: expected with faults, not worth a word
        self.owner.errors.append("".join(traceback.format_exc()))


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like real servers; each response has a Content-Length
    server_version = "shardstream-fault/1"
    timeout = 10  # idle keep-alive connections end after this
    disable_nagle_algorithm = True  # else headers-then-body waits out delayed ACKs (40 ms a request)
    server: _HTTPServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.owner._handle(self, head=False)

    def do_HEAD(self) -> None:
        self.server.owner._handle(self, head=True)


class FaultServer:
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
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        if faults is not None:
            self.faults = faults

    # --- configuration
    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

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
        with self._lock:
            return list(self._log)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._log)

    def requests_for(self, path: str) -> list[Request]:
        path = "/" + path.lstrip("/")
        return [r for r in self.requests if r.path == path]

    def wait_requests(self, count: int, timeout: float = 2.0) -> list[Request]:
        return _wait_for(count, lambda: self.requests, timeout)

    def clear_log(self) -> None:
        with self._lock:
            self._log.clear()

    # --- life cycle
    @property
    def running(self) -> bool:
        return self._httpd is not None

    def start(self) -> FaultServer:
        """Listen (on a free port the first time, on the same one after ``stop()``) in a daemon thread."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = _HTTPServer(self, (HOST, self.port or 0))
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

    def _handle(self, h: _Handler, *, head: bool) -> None:
        method = "HEAD" if head else "GET"
        split = urllib.parse.urlsplit(h.path)
        path = urllib.parse.unquote(split.path) or "/"
        range_header = h.headers.get("Range")
        entry = Request(method, path, range_header, 0, headers={k.lower(): v for k, v in h.headers.items()})

        early: tuple | None = None  # decided under the lock, answered outside it
        with self._lock:
            f = self._faults
            matched = f.only is None or _matches(path, f.only)
            file = self._resolve(path)
            version = self._changes[path]
            if f.redirect and path.startswith("/r/"):
                location = path[2:] + (f"?{split.query}" if split.query else "")
                early = (302, "redirect", {"Location": location})
            elif _matches(path, f.forbid):
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
        if early is not None:
            return self._simple(h, entry, early[0], early[1], head, early[2])

        try:
            st = file.stat()
            size = st.st_size
        except OSError:
            return self._simple(h, entry, 404, None, head)
        etag = f'"{st.st_mtime_ns:x}-{size:x}' + (f'-v{version}"' if version else '"')
        last_modified = email.utils.formatdate(st.st_mtime + version, usegmt=True)
        mtime = int(st.st_mtime) + version
        headers = {"ETag": etag, "Last-Modified": last_modified, "Accept-Ranges": "bytes"}

        # Conditional requests, in RFC 9110's order.
        if_match = h.headers.get("If-Match")
        if if_match is not None and "*" not in if_match and etag not in _etag_list(if_match):
            return self._simple(h, entry, 412, None, head, headers)
        ius = _parse_date(h.headers.get("If-Unmodified-Since"))
        if if_match is None and ius is not None and mtime > ius:
            return self._simple(h, entry, 412, None, head, headers)
        inm = h.headers.get("If-None-Match")
        if inm is not None and ("*" in inm or etag in [t.removeprefix("W/") for t in _etag_list(inm)]):
            return self._simple(h, entry, 304, None, True, headers)
        ims = _parse_date(h.headers.get("If-Modified-Since"))
        if inm is None and ims is not None and mtime <= ims:
            return self._simple(h, entry, 304, None, True, headers)

        wanted = parse_range(range_header, size)  # on HEAD too, as nginx does
        if_range = h.headers.get("If-Range")
        if wanted is not None and if_range is not None and if_range.strip() not in (etag, last_modified):
            wanted = None  # the object changed since the client's copy: send it all
        if wanted == "unsatisfiable":
            return self._simple(h, entry, 416, None, head, {**headers, "Content-Range": f"bytes */{size}"})
        start, end = wanted if wanted is not None else (0, size)
        status = 206 if wanted is not None else 200
        if wanted is not None:
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"

        drop = stall = truncate = None
        if not head:
            with self._lock:
                f = self._faults
                if matched:
                    drop, stall, truncate = _take(f.drop_after), _take(f.stall_after), _take(f.truncate)
                    if drop is None and f.drop_probability and self._rng.random() < f.drop_probability:
                        drop = self._rng.randrange(max(1, end - start))
                stall_seconds, reset = f.stall_seconds, f.reset
                offset = f.change_offset

        length = end - start
        headers["Content-Type"] = "application/octet-stream"
        headers["Content-Length"] = str(length + (truncate or 0))
        entry.status = status
        if stall is not None and (drop is None or stall <= drop):
            entry.fault = "stall"
        elif drop is not None:
            entry.fault = "drop"
        elif truncate:
            entry.fault = "truncate"
        self._record(entry)
        h.send_response(status)
        for name, value in headers.items():
            h.send_header(name, value)
        try:
            h.end_headers()
        except OSError:
            h.close_connection = True
            return None
        if head:
            return None

        cut = min(x for x in (drop, stall, length) if x is not None)
        flip_at = None
        if version and size:
            flip_at = (size // 2 if offset is None else offset) % size
        try:
            with open(file, "rb") as fh:
                fh.seek(start)
                pos = start
                while pos < start + cut:
                    chunk = fh.read(min(self.chunk_size, start + cut - pos))
                    if not chunk:
                        break
                    if flip_at is not None and pos <= flip_at < pos + len(chunk):
                        buf = bytearray(chunk)
                        buf[flip_at - pos] ^= (version & 0xFF) or 0xFF
                        chunk = bytes(buf)
                    entry.bytes_sent += len(chunk)  # counted first, so a client that has them sees them
                    try:
                        h.wfile.write(chunk)
                    except OSError:
                        entry.bytes_sent -= len(chunk)
                        h.close_connection = True
                        return None
                    pos += len(chunk)
        except OSError:
            h.close_connection = True
            return None
        if entry.fault == "stall":
            self._stopping.wait(stall_seconds)
            self._close(h, reset=False)
        elif entry.fault is not None:  # drop or truncate
            self._close(h, reset=reset and entry.fault == "drop")
        return None

    def _simple(
        self,
        h: _Handler,
        entry: Request,
        code: int,
        fault: str | None,
        head: bool,
        headers: dict[str, str] | None = None,
    ) -> None:
        """A response with a short text body (none for HEAD, 304)."""
        body = b"" if code in (204, 304) else f"{code} {http.client.responses.get(code, '')}\n".encode()
        entry.status, entry.fault = code, fault
        self._record(entry)
        try:
            h.send_response(code)
            for name, value in (headers or {}).items():
                h.send_header(name, value)
            if code != 304:
                h.send_header("Content-Type", "text/plain")
                h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            if not head and body:
                entry.bytes_sent = len(body)
                h.wfile.write(body)
        except OSError:
            h.close_connection = True

    def _record(self, entry: Request) -> None:
        """Log a request once its status and fault are known, before its response goes out."""
        with self._lock:
            self._log.append(entry)

    @staticmethod
    def _close(h: _Handler, *, reset: bool) -> None:
        """End the connection mid-response: FIN after what was sent, or RST (unread data may be lost)."""
        h.close_connection = True
        with contextlib.suppress(OSError):
            if reset:
                h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                h.connection.close()
            else:
                h.connection.shutdown(socket.SHUT_WR)


def _parse_date(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return int(email.utils.parsedate_to_datetime(value).timestamp())
    except (TypeError, ValueError, IndexError):
        return None


# ---------------------------------------------------------------------------------------- fixtures
# Use with `pytest_plugins = ["tests.servers"]` in a test module; each serves an empty folder that the
# test fills through `server.root`.


@pytest.fixture
def fault_server(tmp_path: Path) -> Iterator[FaultServer]:
    root = tmp_path / "fault-www"
    root.mkdir()
    with FaultServer(root) as server:
        yield server


@pytest.fixture
def nginx_server(tmp_path: Path) -> Iterator[NginxServer]:
    root = tmp_path / "nginx-www"
    root.mkdir()
    with nginx(root) as server:
        yield server


@pytest.fixture
def nginx_https_server(tmp_path: Path) -> Iterator[NginxServer]:
    root = tmp_path / "nginx-https-www"
    root.mkdir()
    with nginx(root, https=True) as server:
        yield server
