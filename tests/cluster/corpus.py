"""A manifest corpus for packs in parts: real PNGs, missing files, a bad line, a key in two parts, a FIFO."""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

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


def make_corpus(root: Path, *, fifo_record: int | None = None) -> Corpus:
    """RECORDS + 1 manifest lines; ``fifo_record``'s image is a named pipe (a read blocks until served)."""
    (root / "img").mkdir(parents=True)
    good: list[str] = []
    with open(root / "m.jsonl", "w", encoding="utf-8") as handle:
        for i in range(RECORDS):
            key = DUPLICATE[0] if i in DUPLICATE[1] else f"k{i:04d}"
            image = root / "img" / f"{i}.png"
            if i == fifo_record:
                os.mkfifo(image)
            elif i not in MISSING:
                image.write_bytes(png(i))
            if i not in MISSING:
                good.append(key)
            handle.write(json.dumps({"id": key, "image": f"img/{i}.png", "caption": f"c{i}"}) + "\n")
            if i == BAD_LINE_AFTER:
                handle.write("{not json\n")
    return Corpus(root / "m.jsonl", root, good)


class FifoServer:
    """Holds readers of a FIFO record until ``serve()``: a part is held at a known record, for a test to
    kill what runs it. Serving puts a plain file with ``png(record)`` in the FIFO's place, and gives the
    same bytes once to a reader already waiting on the FIFO."""

    def __init__(self, path: Path, record: int) -> None:
        self.path, self.data = path, png(record)
        # Read and write: never blocks, and keeps a writer, so readers wait in read(), not in open().
        self.fd: int | None = os.open(path, os.O_RDWR)

    def serve(self) -> None:
        if self.fd is None:
            return
        staged = self.path.with_name(self.path.name + ".staged")
        staged.write_bytes(self.data)
        os.replace(staged, self.path)
        os.write(self.fd, self.data)  # for a reader that opened the FIFO before the replace
        os.close(self.fd)  # the last writer gone: that reader then sees the end
        self.fd = None

    def stop(self) -> None:
        self.serve()


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
