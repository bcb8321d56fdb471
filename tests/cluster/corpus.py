"""A manifest corpus for packs in parts: real PNGs, missing files, a bad line, a key in two parts, a held URL.

The held URL is an image served over HTTP only when a test releases it: a part stopped at a known record."""

from __future__ import annotations

import hashlib
import io
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from PIL import Image

from packer.cluster.rayhead import live_sessions

RECORDS = 120
MISSING = {7, 44, 45, 101}  # records whose image file is never written
DUPLICATE = ("shared", (3, 97))  # one key in records 3 and 97: two different parts at --partition-rows 40
BAD_LINE_AFTER = 60  # a line that is not JSON follows this record: record 61 is a bad-record reject


@dataclass
class Corpus:
    manifest: Path
    root: Path
    good_keys: list[str]  # in record order, the duplicate twice


def png(i: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (6 + i % 7, 5), (i % 256, 3 * i % 256, 7)).save(out, format="PNG")
    return out.getvalue()


def make_corpus(root: Path, *, held: HeldImage | None = None) -> Corpus:
    """RECORDS + 1 manifest lines; ``held.record``'s image is named by ``held.url`` (served when released)."""
    (root / "img").mkdir(parents=True)
    good: list[str] = []
    with open(root / "m.jsonl", "w", encoding="utf-8") as handle:
        for i in range(RECORDS):
            key = DUPLICATE[0] if i in DUPLICATE[1] else f"k{i:04d}"
            image = f"img/{i}.png"
            if held is not None and i == held.record:
                image = held.url
            elif i not in MISSING:
                (root / image).write_bytes(png(i))
            if i not in MISSING:
                good.append(key)
            handle.write(json.dumps({"id": key, "image": image, "caption": f"c{i}"}) + "\n")
            if i == BAD_LINE_AFTER:
                handle.write("{not json\n")
    return Corpus(root / "m.jsonl", root, good)


class HeldImage:
    """An HTTP server on 127.0.0.1 holding every request for one record's image until ``serve()``: a part
    is held at a known record, for a test to kill what runs it or to start a second run of that part.
    (A FIFO cannot hold a reader: the packer refuses anything but a regular file, unblocked.)"""

    def __init__(self, record: int) -> None:
        self.record, self.data = record, png(record)
        self.released = threading.Event()
        held = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # the name http.server calls
                held.released.wait()
                self.send_response(200)
                self.send_header("Content-Length", str(len(held.data)))
                self.end_headers()
                self.wfile.write(held.data)

            def log_message(self, *args: object) -> None: ...

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                pass  # a killed reader's connection: the answer has nowhere to go

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/{record}.png"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def serve(self) -> None:
        self.released.set()

    def stop(self) -> None:
        self.serve()
        self.server.shutdown()
        self.server.server_close()


def digests(outdir: Path) -> dict[str, str]:
    """sha256 of every file in OUTDIR (shards, sidecars, index, rejects); hidden ones must not be left."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(outdir.iterdir()) if p.is_file()
    }


def read_keys(outdir: Path) -> list[str]:
    from streamer import ShardDataset

    dataset = ShardDataset(str(outdir / "shardstream-index.json"), shuffle=False, decode=False)
    return [sample["__key__"] for sample in dataset]


def rejects(outdir: Path) -> list[dict[str, str]]:
    path = outdir / "shardstream-rejects.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def head_below(driver: int) -> int | None:
    """The Ray head a ``pack --engine ray`` driver started for itself (it leads its own session), if any."""
    for pid in live_sessions() or {}:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
        if ppid == driver and b"packer.cluster.rayhead" in cmdline:
            return pid
    return None
