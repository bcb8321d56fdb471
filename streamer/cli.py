"""The ``shardstream`` command: the packer's commands plus the ones that need the streamer (demo)."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from packer.cli import app
from packer.format import BracePattern, DatasetIndex, split_member_name
from packer.format.tarread import iter_members

__all__ = ["app", "main"]


@app.command("demo")
def demo_command(
    workdir: Annotated[
        Path | None, typer.Option(help="Keep the corpus and shards here (default: a temp folder).")
    ] = None,
    samples: Annotated[int, typer.Option(help="Samples in the generated corpus.")] = 48,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Make a small multimodal corpus, pack it, read it back, and print a summary."""
    from packer import PackOptions, pack
    from packer.synth import make_corpus

    with tempfile.TemporaryDirectory(prefix="shardstream-demo-") as tmp:
        root = workdir or Path(tmp)
        started = time.monotonic()
        corpus = make_corpus(root / "corpus", samples)
        options = PackOptions(max_size=64 * 1024, workers=1, overwrite=True)
        from_dir = pack(corpus.files_dir, root / "shards-dir", options)
        from_manifest = pack(corpus.manifest, root / "shards-manifest", options)
        read = {}
        for name, summary in (("directory", from_dir), ("manifest", from_manifest)):
            index = DatasetIndex.load(summary.index)
            base = Path(summary.index).parent
            keys, members, extensions = set(), 0, {}
            for shard in BracePattern(index.pattern):
                with open(base / shard, "rb") as handle:
                    for member in iter_members(handle, url=shard):
                        key, ext = split_member_name(member.name)
                        keys.add(key)
                        members += 1
                        extensions[ext] = extensions.get(ext, 0) + 1
            read[name] = {
                "pattern": summary.pattern,
                "shards": summary.shards,
                "samples_packed": summary.samples,
                "samples_read": len(keys),
                "members_read": members,
                "bytes": summary.bytes,
                "skipped": summary.skipped,
                "extensions": dict(sorted(extensions.items())),
            }
        result = {"corpus_samples": corpus.samples, "seconds": round(time.monotonic() - started, 2), **read}
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    typer.echo(f"corpus: {corpus.samples} synthetic samples (images, audio, video, text, json)")
    for name in ("directory", "manifest"):
        r = result[name]
        typer.echo(
            f"{name:9} -> {r['shards']} shards {r['pattern']}: packed {r['samples_packed']} samples, "
            f"read back {r['samples_read']} samples / {r['members_read']} members, {r['bytes'] / 1e6:.2f} MB"
        )
        typer.echo(f"{'':12} members by extension: {r['extensions']}")
    typer.echo(f"done in {result['seconds']}s")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
