"""The object-store benchmarks' server: the shaped S3 server in a child process, every request timed.

One for the ceiling, deferred and peers benches, so their figures come from the same server set-up.

Trade-off: the times come from wrapping the server's per-request handler (``Exchange.respond``) in the
child, so the log says when each request started and ended at the server (requests in flight, when the
metadata was in) without touching the test server's code; a rename there breaks this module, loudly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness package

from harness import REPO

SHARD_KINDS = ("range", "GET")  # a request for sample bytes, when it is for a shard or chunk


# ---------------------------------------------------------------------------------------------------------
def serve(root: str, ttfb: float, rate: float | None) -> None:
    """Child side: serve; on stdin ``reset`` clears the log, ``spans`` prints it as JSON, EOF stops."""
    sys.path.insert(0, str(REPO))
    from tests.servers import shaped_s3_http as http
    from tests.servers.shaped_s3 import ShapedS3Server

    spans: list[tuple[float, float, str, str, int]] = []
    respond = http.Exchange.respond

    async def timed(self: Any) -> Any:  # every request's start and end, at the server
        began = time.time()
        try:
            return await respond(self)
        finally:
            spans.append((began, time.time(), self.entry.kind, self.entry.path, self.entry.bytes_sent))

    http.Exchange.respond = timed
    with ShapedS3Server(Path(root), ttfb=ttfb, rate=rate) as srv:
        print(json.dumps({"url": srv.endpoint_url, "bucket": srv.bucket}), flush=True)
        for line in sys.stdin:
            if line.strip() == "reset":
                spans.clear()
            print(json.dumps(list(spans) if line.strip() == "spans" else "ok"), flush=True)


class Server:
    """``with Server(root, ttfb, rate) as srv:`` srv.url, srv.bucket, srv.reset(), srv.spans()."""

    def __init__(self, root: Path, ttfb: float, rate: float | None) -> None:
        self.args = [str(root), str(ttfb), str(rate or 0)]

    def __enter__(self) -> Server:
        cmd = [sys.executable, __file__, *self.args]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
        hello = json.loads(self.proc.stdout.readline())
        self.url, self.bucket = hello["url"], hello["bucket"]
        return self

    def ask(self, word: str) -> Any:
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def reset(self) -> None:
        self.ask("reset")

    def cpu_seconds(self) -> float:
        """CPU time the server process has used so far (user + system), from /proc."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def spans(self) -> list[list[Any]]:
        return self.ask("spans")

    def __exit__(self, *exc: object) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)


def in_flight(spans: list[list[Any]]) -> tuple[int, float]:
    """Peak requests in flight, and their time-weighted mean from the first start to the last end."""
    events = sorted([(s[0], 1) for s in spans] + [(s[1], -1) for s in spans], key=lambda e: (e[0], e[1]))
    if not events:
        return 0, 0.0
    now = peak = 0
    area, last = 0.0, events[0][0]
    for when, step in events:
        area += now * (when - last)
        now, last = now + step, when
        peak = max(peak, now)
    return peak, area / max(events[-1][0] - events[0][0], 1e-9)


def request_facts(
    spans: list[list[Any]], t_start: float, t_first: float | None, ttfb: float
) -> dict[str, Any]:
    """What the server saw of one run: kinds, in flight, bytes, RTTs from the index to the first sample
    (issue 35's "after the index": the dataset's index file; a shard's sidecars come after it and count)."""
    kinds: dict[str, int] = {}
    for s in spans:
        kinds[s[2]] = kinds.get(s[2], 0) + 1
    peak, mean = in_flight(spans)
    data = [s for s in spans if s[2] in SHARD_KINDS and is_data(s[3])]
    before = [s for s in spans if t_first is None or s[1] <= t_first]
    index_ends = [s[1] for s in before if is_index(s[3])]
    # no index (webdataset, s3torchconnector): counted from the start of the dataset's construction
    after = (t_first - max(index_ends or [t_start])) if t_first else None
    # the figure before 2026-12-07: from the last request of any metadata (sidecars too) ended by then
    meta_ends = [s[1] for s in before if not is_data(s[3])]
    after_meta = (t_first - max(meta_ends or [t_start])) if t_first else None
    return {
        "kinds": kinds,
        "requests": len(spans),
        "peak_in_flight": peak,
        "mean_in_flight": mean,
        "wire_bytes": sum(s[4] for s in spans),
        "data_requests": len(data),
        "after_index_s": after,
        "rtts_after_index": after / ttfb if after is not None and ttfb else None,
        "rtts_after_metadata": after_meta / ttfb if after_meta is not None and ttfb else None,
    }


def is_data(path: str) -> bool:
    return path.endswith(".tar") or path.endswith(".bin")


def is_index(path: str) -> bool:
    """A dataset's index file: ours, or LitData's ``index.json``."""
    return path.endswith("index.json")


def shard_gets(spans: list[list[Any]]) -> int:
    """GETs of shard bytes (whole or ranged) among ``spans``."""
    return sum(1 for s in spans if s[2] in SHARD_KINDS and s[3].endswith(".tar"))


if __name__ == "__main__":
    serve(sys.argv[1], float(sys.argv[2]), float(sys.argv[3]) or None)
