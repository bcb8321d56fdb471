"""Real servers for the remote tests: nginx, a small fault-injecting HTTP server, and moto's S3.

All bind only to 127.0.0.1 on a free port and stop themselves when their ``with`` block ends.

``nginx(root, https=False)`` runs the system's nginx (Debian ``nginx-light``) on a config written into a
temp dir, serving ``root`` statically: Range, ETag, Last-Modified, If-Range, exactly as in production.
With ``https=True`` it also serves TLS with a throwaway CA made here (``ca_bundle``).

``FaultServer(root)`` is a ``ThreadingHTTPServer`` in a daemon thread that serves files with Range, ETag,
Last-Modified and the conditional headers, and misbehaves on request: ``server.set_faults(drop_after=[N])``
and the other fields of :class:`Faults`. Both servers log every request as a :class:`Request`.

``moto_s3()`` runs moto's S3 server in a thread on 127.0.0.1, points this process's environment at it
(``AWS_ENDPOINT_URL_S3``, dummy credentials: children inherit them) and makes an empty bucket.

Test modules use the context managers directly, or the fixtures (``fault_server``, ``nginx_server``,
``nginx_https_server``, the session-wide ``s3_bucket``) through ``pytest_plugins = ["tests.servers"]``.

Modules: ``common`` (HOST, free ports, the request log), ``tls`` (the throwaway CA), ``nginx_config`` and
``nginx`` (nginx), ``faults``, ``ranges``, ``handler`` and ``fault_server`` (the fault-injecting server),
``s3`` (moto), ``fixtures`` (the pytest fixtures).
"""

from tests.servers.common import HOST, Request, free_port
from tests.servers.fault_server import FaultServer
from tests.servers.faults import MAX_STALL_SECONDS, Faults, IntOrList
from tests.servers.fixtures import fault_server, nginx_https_server, nginx_server, s3_bucket
from tests.servers.nginx import NginxServer, nginx
from tests.servers.nginx_config import NGINX_CANDIDATES, NGINX_INSTALL_HINT, READY_PATH, find_nginx
from tests.servers.ranges import parse_range
from tests.servers.s3 import MotoS3Server, S3Bucket, moto_s3, s3_environment
from tests.servers.tls import TLSFiles, make_tls_files

__all__ = [
    "HOST",
    "MAX_STALL_SECONDS",
    "NGINX_CANDIDATES",
    "NGINX_INSTALL_HINT",
    "READY_PATH",
    "FaultServer",
    "Faults",
    "IntOrList",
    "MotoS3Server",
    "NginxServer",
    "Request",
    "S3Bucket",
    "TLSFiles",
    "fault_server",
    "find_nginx",
    "free_port",
    "make_tls_files",
    "moto_s3",
    "nginx",
    "nginx_https_server",
    "nginx_server",
    "parse_range",
    "s3_bucket",
    "s3_environment",
]
