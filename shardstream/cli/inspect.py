"""``shardstream info`` and ``shardstream verify``: show a packed dataset, and check it against its index."""

from __future__ import annotations

from pathlib import Path

import typer

from ..errors import ShardstreamError
from ..format.index import DatasetIndex
from ..format.verify import verify_dataset
from .common import IndexArgument, JsonFlag, echo_json, fail, index_path


def info_command(index: IndexArgument, as_json: JsonFlag = False) -> None:
    """Show a packed dataset's index: pattern, shards, samples, bytes, fields.

    Example: shardstream info shards/
    """
    path = index_path(index)
    try:
        loaded = DatasetIndex.load(path)
    except (OSError, ShardstreamError) as exc:
        raise _index_failure(path, exc) from exc
    doc = {
        "pattern": loaded.pattern,
        "shards": len(loaded.shards),
        "samples": loaded.samples,
        "bytes": loaded.bytes,
        "fields": loaded.fields,
        "rejected": loaded.rejected,
    }
    if as_json:
        echo_json(doc)
        return
    for name, value in doc.items():
        typer.echo(f"{name + ':':10}{value}")


def verify_command(index: IndexArgument, as_json: JsonFlag = False) -> None:
    """Check every shard against the index: size, sha256, sample count, offsets. Exit 1 on a mismatch.

    Example: shardstream verify shards/ --json
    """
    path = index_path(index)
    try:
        problems = verify_dataset(path)
    except (OSError, ShardstreamError) as exc:
        raise _index_failure(path, exc) from exc
    if as_json:
        echo_json({"index": str(path), "problems": problems, "ok": not problems})
    else:
        for problem in problems:
            typer.echo(problem)
        typer.echo("ok" if not problems else f"{len(problems)} problem(s)")
    if problems:
        raise typer.Exit(1)


def _index_failure(path: Path, exc: OSError | ShardstreamError) -> typer.Exit:
    """The error for an index that cannot be read, naming it once: a ShardstreamError names it itself."""
    if isinstance(exc, ShardstreamError):
        return fail(str(exc))
    return fail(f"{path}: {exc.strerror or exc}")
