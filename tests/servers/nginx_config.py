"""Which nginx binary to run and the config it gets (never a skip when missing: CI must run these)."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

from tests.servers.common import HOST
from tests.servers.tls import TLSFiles

NGINX_CANDIDATES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")
NGINX_INSTALL_HINT = (
    "nginx is needed by the HTTP tests and was not found (looked for $SHARDSTREAM_NGINX, `nginx` on PATH, "
    + ", ".join(NGINX_CANDIDATES)
    + "): install it with `apt-get install nginx-light` (bash .ci/setup does this)"
)
READY_PATH = "/__shardstream_ready__"


def find_nginx() -> str:
    """The nginx binary, or a RuntimeError that says how to install it (never a skip: CI must run these)."""
    candidates = [os.environ.get("SHARDSTREAM_NGINX"), shutil.which("nginx"), *NGINX_CANDIDATES]
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeError(NGINX_INSTALL_HINT)


def die_with_parent() -> Callable[[], None] | None:
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


def render_config(
    prefix: Path, root: Path, port: int | None, https_port: int | None, tls: TLSFiles | None, extra: str
) -> str:
    """nginx.conf for ``root`` on ``port`` (and ``https_port`` with ``tls``), its files under ``prefix``."""
    user = ""
    if os.geteuid() == 0:  # workers would drop to `nobody`, which can't read pytest's 0700 temp dirs
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};\n"
    tls_lines = ""
    if tls is not None:
        tls_lines = (
            f"        listen {HOST}:{https_port} ssl;\n"
            f"        ssl_certificate {tls.cert};\n"
            f"        ssl_certificate_key {tls.key};\n"
            "        ssl_protocols TLSv1.2 TLSv1.3;\n"
        )
    return _NGINX_CONF.format(
        user=user,
        prefix=prefix,
        host=HOST,
        port=port,
        tls=tls_lines,
        root=root,
        ready=READY_PATH,
        extra=extra,
    )
