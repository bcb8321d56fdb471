"""``shardstream demo``: make a small multimodal corpus, pack it, stream it back, print what came out."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from shardstream.sizes import format_size

from ..common import JsonFlag, QuietFlag, echo_json

Workdir = Annotated[
    Path | None, typer.Option(help="Keep the corpus and shards here (default: a temp folder).")
]
Samples = Annotated[int, typer.Option(help="Samples in the generated corpus.")]
Workers = Annotated[int, typer.Option(help="DataLoader workers for the streaming part.")]


def demo_command(
    workdir: Workdir = None,
    samples: Samples = 48,
    workers: Workers = 2,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Make a small multimodal corpus, pack it, stream it back decoded through a DataLoader, summarise.

    Example: shardstream demo --samples 100 --workers 2
    """
    from . import LAYOUTS, run_demo

    say = None if quiet or (as_json and not sys.stderr.isatty()) else _to_stderr
    result = run_demo(workdir, samples, workers, say=say)
    if as_json:
        echo_json(result)
        return
    typer.echo(f"corpus: {result['corpus_samples']} synthetic samples (images, audio, video, text, json)")
    for layout in LAYOUTS:
        r = result[layout]
        typer.echo(
            f"{layout:9} packed {r['samples_packed']} samples into {r['shards']} shards {r['pattern']} "
            f"({format_size(r['bytes'])}); streamed {r['samples_read']} samples with {workers} workers"
        )
        for kind, info in r["decoded"].items():
            typer.echo(f"{'':12}{kind:5} x{info['count']:<3} {info['example']}")
        typer.echo(f"{'':12}errors: {r['errors']}")
    typer.echo(f"done in {result['seconds']}s")


def _to_stderr(text: str) -> None:
    typer.echo(text, err=True)
