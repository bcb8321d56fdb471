"""``shardstream columns``: a per-sample column from the user's function, written beside existing shards."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from shardstream.errors import ShardstreamError

from .common import JsonFlag, QuietFlag, echo_json, fail, shown_path

Dataset = Annotated[Path, typer.Argument(help="A packed or indexed dataset: its folder or its index file.")]
Fn = Annotated[
    str,
    typer.Option(
        help="module:function called with each sample (a dict of raw bytes by member name, plus "
        "__key__ and __url__), returning an int, or a dict of column name -> int.",
        metavar="MODULE:FUNCTION",
    ),
]
Name = Annotated[str, typer.Option(help="The column an int result goes to ([a-z0-9_], 1-24 characters).")]
Workers = Annotated[int, typer.Option(help="Shards computed at once (processes, or Ray tasks).")]
Engine = Annotated[
    str, typer.Option(help="local (a process pool) or ray (Ray core tasks).", metavar="ENGINE")
]
Address = Annotated[
    str | None,
    typer.Option(help="With --engine ray: the cluster's address; default: a Ray head for this run alone."),
]
Restart = Annotated[bool, typer.Option(help="Forget an interrupted run's journal and compute every shard.")]


def columns_command(
    dataset: Dataset,
    fn: Fn,
    name: Name = "cost",
    workers: Workers = 1,
    engine: Engine = "local",
    address: Address = None,
    restart: Restart = False,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Compute a per-sample column (e.g. a token count as cost) with your function.

    Writes each shard's .cols sidecar (other columns in it are kept) and the index's column and
    per-shard sums; never rewrites a shard. A killed run continues where it stopped when run again
    with the same options. Token budgets read the cost column.

    Example: shardstream columns data/ --fn mypkg.costs:tokens --workers 8
    """
    from shardstream.columns import ColumnOptions, compute_columns

    bar = _Bar(quiet or as_json)
    options = ColumnOptions(
        fn=fn,
        name=name,
        workers=workers,
        engine=engine,
        address=address,
        start_head=_start_head,
        restart=restart,
        progress=bar.update,
        planned=bar.plan,
    )
    if engine == "ray" and address is None:
        from packer.cluster.rayhead import AUTH_MODE

        # Token auth on both ends, as pack --engine ray starts its head: set before Ray is imported.
        os.environ.setdefault(AUTH_MODE, "token")
    if "" not in sys.path:  # `python -m` puts the working folder on the path, the console script not
        sys.path.insert(0, "")
    try:
        summary = compute_columns(dataset, options)
    except (ValueError, OSError, ShardstreamError) as exc:
        shown = f"{exc.filename}: {exc.strerror}" if isinstance(exc, OSError) and exc.filename else str(exc)
        raise fail(shown) from exc
    finally:
        bar.close()
    if as_json:
        echo_json({**summary.to_json(), "index": shown_path(summary.index)})
        return
    shown = ", ".join(f"{n} ({summary.columns[n]}, {total:,} in all)" for n, total in summary.sums.items())
    journaled = summary.shards - summary.computed
    note = f" ({summary.computed} computed now, {journaled} from the journal)" if journaled else ""
    typer.echo(f"columns {shown} for {summary.samples:,} samples in {summary.shards} shards{note}")
    typer.echo(f"index: {shown_path(summary.index)} ({summary.seconds}s)")


def _start_head(cpus: int) -> Any:
    from packer.cluster.rayhead import LocalHead  # Ray's head comes with the packer's cluster extra

    return LocalHead.start(cpus)


class _Bar:
    """Samples done of those planned, a shard's worth at a time, on stderr."""

    def __init__(self, quiet: bool) -> None:
        from tqdm import tqdm

        self.bar = tqdm(unit=" samples", disable=quiet, file=sys.stderr, dynamic_ncols=True, miniters=1)

    def plan(self, shards: int, samples: int) -> None:
        self.bar.reset(total=samples)

    def update(self, record: dict[str, Any]) -> None:
        self.bar.update(record["samples"])

    def close(self) -> None:
        self.bar.close()
