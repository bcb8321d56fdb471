"""``shardstream subset``: choose samples by key or by column value as a small subset index; no shard is
rewritten."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from shardstream.errors import ShardstreamError

from .common import JsonFlag, QuietFlag, echo_json, fail, shown_path

Dataset = Annotated[str, typer.Argument(help="A packed or indexed dataset: its folder, index file or URL.")]
Out = Annotated[
    Path, typer.Option(help="The folder the subset index and its masks are written to.", metavar="DIR")
]
Include = Annotated[
    Path | None,
    typer.Option(
        help="Keep only samples whose key is in this file (text, one a line, or .parquet).", metavar="FILE"
    ),
]
Exclude = Annotated[
    Path | None,
    typer.Option(
        help="Leave out samples whose key is in this file (text or .parquet); repeats too.", metavar="FILE"
    ),
]
Column = Annotated[
    str | None,
    typer.Option(
        help="The Parquet column holding the keys; default: its only string column.", metavar="NAME"
    ),
]
Where = Annotated[
    str | None,
    typer.Option(
        help="Keep samples whose per-sample columns pass this, e.g. 'cost < 4096 and quality >= 5': "
        "names, numbers, comparisons, and/or/not, in (...), + - * / // %.",
        metavar="EXPR",
    ),
]


def subset_command(
    dataset: Dataset,
    out: Out,
    include: Include = None,
    exclude: Exclude = None,
    column: Column = None,
    where: Where = None,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Choose samples by key or column value: a subset index, no shard rewritten.

    Keys are looked up in the dataset's sorted key file; --where reads each shard's per-sample
    columns (.cols), never a sample. Kept: in --include (when given), not in --exclude, and passing
    --where. ShardDataset, Mixture and ShardMap open the subset like any index.

    Example: shardstream subset data/ --exclude eval.txt --out subsets/clean
    """
    from shardstream.subset import SubsetOptions, make_subset

    bar = _Bar(quiet or as_json)
    try:
        options = SubsetOptions(include=include, exclude=exclude, where=where, column=column)
        summary = make_subset(dataset, out, options, progress=bar.update)
    except (ValueError, OSError, ShardstreamError) as exc:
        shown = f"{exc.filename}: {exc.strerror}" if isinstance(exc, OSError) and exc.filename else str(exc)
        raise fail(shown) from exc
    finally:
        bar.close()
    doc = {**summary.to_json(), "out": shown_path(summary.out), "index": shown_path(summary.index)}
    doc["dataset"] = shown_path(summary.dataset)
    if as_json:
        echo_json(doc)
        return
    share = f" ({summary.kept / summary.samples:.1%})" if summary.samples else ""
    typer.echo(f"kept {summary.kept:,} of {summary.samples:,} samples{share}")
    for rule, left in summary.left_out.items():
        typer.echo(f"left out by {rule}: {left:,}")
    for rule in ("include", "exclude"):
        if rule in summary.rule:
            keys = summary.rule[rule]
            typer.echo(f"{rule} keys: {keys['found']:,} found, {keys['missing']:,} not in the dataset")
    typer.echo(f"subset: {doc['index']}")


class _Bar:
    """The key file's bytes walked, then the shards whose columns were read, on stderr."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.bar: Any = None
        self.stage = ""

    def update(self, stage: str, done: int, total: int) -> None:
        if self.quiet:
            return
        if stage != self.stage or self.bar is None or done < self.bar.n:  # a new walk or stage
            from tqdm import tqdm

            self.close()
            unit, scale = ("B", True) if stage == "keys" else (" shards", False)
            self.bar = tqdm(
                total=total, unit=unit, unit_scale=scale, desc=stage, file=sys.stderr, dynamic_ncols=True
            )
            self.stage = stage
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
