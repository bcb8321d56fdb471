"""The ``shardstream`` command: the packer's commands plus the ones that need the streamer (stream, demo)."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from packer.cli import app

__all__ = ["app", "main"]


@app.command("demo")
def demo_command(
    workdir: Annotated[Path | None, typer.Option(help="Keep the corpus and shards here (default: a temp folder).")] = None,  # noqa: E501
    samples: Annotated[int, typer.Option(help="Samples in the generated corpus.")] = 48,
    workers: Annotated[int, typer.Option(help="DataLoader workers for the streaming part.")] = 2,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Make a small multimodal corpus, pack it, stream it back decoded through a DataLoader, summarise."""
    from packer import PackOptions, pack
    from packer.synth import make_corpus

    with tempfile.TemporaryDirectory(prefix="shardstream-demo-") as tmp:
        root = workdir or Path(tmp)
        started = time.monotonic()
        corpus = make_corpus(root / "corpus", samples)
        options = PackOptions(max_size=64 * 1024, overwrite=True)
        result: dict[str, Any] = {"corpus_samples": corpus.samples}
        for layout, source in (("directory", corpus.files_dir), ("manifest", corpus.manifest)):
            summary = pack(source, root / f"shards-{layout}", options)
            result[layout] = {
                "pattern": summary.pattern,
                "shards": summary.shards,
                "samples_packed": summary.samples,
                "bytes": summary.bytes,
                "skipped": summary.skipped,
                **_stream_summary(Path(summary.index), workers),
            }
        result["seconds"] = round(time.monotonic() - started, 2)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    typer.echo(f"corpus: {corpus.samples} synthetic samples (images, audio, video, text, json)")
    for layout in ("directory", "manifest"):
        r = result[layout]
        typer.echo(
            f"{layout:9} packed {r['samples_packed']} samples into {r['shards']} shards {r['pattern']} "
            f"({r['bytes'] / 1e6:.2f} MB); streamed {r['samples_read']} samples with {workers} workers"
        )
        for kind, info in r["decoded"].items():
            typer.echo(f"{'':12}{kind:5} x{info['count']:<3} {info['example']}")
        typer.echo(f"{'':12}errors: {r['errors']}")
    typer.echo(f"done in {result['seconds']}s")


@app.command("stream")
def stream_command(
    source: Annotated[str, typer.Argument(help="An index (path, folder or URL), or a brace pattern.")],
    workers: Annotated[int, typer.Option(help="DataLoader workers.")] = 0,
    decode: Annotated[bool, typer.Option(help="Decode members (images to tensors), or keep bytes.")] = True,
    limit: Annotated[int | None, typer.Option(help="Stop after this many samples.")] = None,
    rank: Annotated[int, typer.Option(help="Read as this rank...")] = 0,
    world_size: Annotated[int, typer.Option(help="...of this many.")] = 1,
    on_error: Annotated[str, typer.Option(help="raise, skip or warn.")] = "raise",
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Stream a dataset as training would and report samples/s, members seen and errors.

    Example: shardstream stream https://host/data/shardstream-index.json --workers 2 --limit 10000
    """
    from torch.utils.data import DataLoader

    from packer.errors import ShardstreamError
    from streamer import ShardDataset

    try:
        dataset = ShardDataset(source, decode=decode, image="torch", rank=rank, world_size=world_size,
                               on_error=on_error)  # fmt: skip
        loader = DataLoader(dataset, batch_size=None, num_workers=workers)
        started = time.monotonic()
        count, members = 0, {}
        for sample in loader:
            count += 1
            for name in sample:
                if not name.startswith("__"):
                    members[name] = members.get(name, 0) + 1
            if limit is not None and count >= limit:
                break
        seconds = time.monotonic() - started
    except (ShardstreamError, ValueError) as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from exc
    summary = {
        "source": source,
        "samples": count,
        "seconds": round(seconds, 3),
        "samples_per_s": round(count / seconds, 1) if seconds else None,
        "members": dict(sorted(members.items())),
        "errors": dataset.errors,
    }
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    typer.echo(f"{count} samples in {seconds:.2f}s ({summary['samples_per_s']} samples/s)")
    typer.echo(f"members: {summary['members']}")
    typer.echo(f"errors:  {summary['errors']}")


def _stream_summary(index: Path, workers: int) -> dict[str, Any]:
    """Stream a packed dataset back, decoded, and describe what came out."""
    from torch.utils.data import DataLoader

    from streamer import ShardDataset

    dataset = ShardDataset(index, image="torch", video_frames=4, buffer_size=16)
    loader = DataLoader(dataset, batch_size=None, num_workers=workers)
    keys, decoded = set(), {}
    for sample in loader:
        keys.add(sample["__key__"])
        for name, value in sample.items():
            if name.startswith("__"):
                continue
            kind = name.rsplit(".", 1)[-1]
            shape = _describe(value)
            entry = decoded.setdefault(kind, {"count": 0, "example": shape})
            entry["count"] += 1
    return {"samples_read": len(keys), "decoded": dict(sorted(decoded.items())), "errors": dataset.errors}


def _describe(value: Any) -> str:
    # DataLoader turns (waveform, rate) tuples into lists.
    if isinstance(value, (tuple, list)) and len(value) == 2 and hasattr(value[0], "shape"):
        return f"audio {tuple(value[0].shape)} @ {value[1]} Hz"
    if hasattr(value, "shape"):
        return f"{type(value).__name__} {tuple(value.shape)} {getattr(value, 'dtype', '')}"
    return type(value).__name__


def main() -> None:
    app()


if __name__ == "__main__":
    main()
