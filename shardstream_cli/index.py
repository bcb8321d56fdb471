"""``shardstream index``: adopt tars that already exist (webdataset, img2dataset, GNU tar) in one command."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from shardstream.errors import ShardstreamError
from shardstream.sizes import format_size

from .common import JsonFlag, QuietFlag, echo_json, fail, shown_path, shown_paths

Source = Annotated[
    str,
    typer.Argument(
        help="Shards: a folder (walked for .tar), a brace pattern (data/train-{000..127}.tar, "
        "https://host/train-{0..99}.tar), a list file (one path or URL per line), or an fsspec "
        "folder (s3://bucket/prefix/)."
    ),
]
Out = Annotated[
    Path | None,
    typer.Option(
        help="Write the index, sidecars and key file here (needed for remote or read-only shards); "
        "default: beside the shards. Tars are never rewritten."
    ),
]
Workers = Annotated[int, typer.Option(help="Processes scanning shards in parallel.")]
Checksum = Annotated[bool, typer.Option(help="Also record each shard's sha256 (reads every byte).")]
Partial = Annotated[
    bool,
    typer.Option("--partial", help="Index a damaged shard up to the damage instead of leaving it out."),
]
Part = Annotated[
    str | None,
    typer.Option(
        help="Scan only part i of N (e.g. 2/8), to split the work across machines sharing --out; "
        "a later run without --part merges the parts and writes the index."
    ),
]
Cost = Annotated[
    str | None,
    typer.Option(
        help="A numeric field of each sample's .json record (e.g. num_tokens): its cost, written to a "
        ".cols sidecar per shard for token budgets. A sample without one is a bad-cost problem and "
        "the index then has no cost column (fix the records, or use shardstream columns).",
        metavar="FIELD",
    ),
]
Restart = Annotated[bool, typer.Option(help="Forget an interrupted run's journal and scan everything again.")]


def index_command(
    source: Source,
    out: Out = None,
    workers: Workers = 1,
    checksum: Checksum = False,
    partial_: Partial = False,
    part: Part = None,
    restart: Restart = False,
    cost: Cost = None,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Index existing tar shards: offsets sidecars, a key file and shardstream-index.json.

    Reads only the 512-byte tar headers of local shards (seeking over member data) and streams remote
    ones. A killed run continues where it stopped when run again. Damaged, missing or compressed shards
    are reported (shardstream-rejects.jsonl) and left out, never fatal. Afterwards ShardDataset and
    ShardMap take the index; `shardstream ls/cat/stats` look inside.

    Example: shardstream index data/ --workers 8 --json
    """
    from shardstream.indexer import IndexOptions, index_source

    bar = _Bar(quiet or as_json)
    options = IndexOptions(
        out=out,
        workers=workers,
        checksum=checksum,
        partial=partial_,
        part=_parse_part(part),
        restart=restart,
        progress=bar.update,
        planned=bar.plan,
        cost=cost,
    )
    try:
        summary = index_source(source, options)
    except (ValueError, OSError, ShardstreamError) as exc:
        raise fail(str(exc) if not isinstance(exc, OSError) else f"{exc.filename}: {exc.strerror}") from exc
    finally:
        bar.close()
    if as_json:
        echo_json(shown_paths(summary.to_json(), "index", "out", "rejects"))
    else:
        _print(summary)
    if summary.index is None and summary.part is None:
        raise typer.Exit(1)


def _parse_part(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    i, slash, n = text.partition("/")
    if not (slash and i.isdigit() and n.isdigit() and 1 <= int(i) <= int(n)):
        raise fail(f"--part {text!r}: give i/N with 1 <= i <= N, e.g. --part 1/4", code=2)
    return int(i), int(n)


def _print(summary: Any) -> None:
    if summary.part is not None:
        typer.echo(
            f"part {summary.part}: scanned {summary.scanned} shards ({summary.samples} samples); "
            f"{summary.remaining} shards of all parts still to scan"
        )
    else:
        size = format_size(summary.bytes)
        left_out = sum(1 for problem in summary.problems if problem["kind"] != "bad-cost")  # shards
        journaled = summary.shards + left_out - summary.scanned
        note = f" ({summary.scanned} scanned now, {journaled} from the journal)" if journaled > 0 else ""
        typer.echo(
            f"indexed {summary.samples} samples in {summary.shards} shards ({size}) in "
            f"{summary.seconds}s{note}"
        )
        typer.echo(f"pattern: {summary.pattern or '(none: the index lists the shard names)'}")
        typer.echo(f"index:   {shown_path(summary.index)}")
        if summary.cost_total is not None:
            typer.echo(f"cost:    {summary.cost_total:,} in all, a .cols beside each offsets sidecar")
        elif summary.skipped.get("bad-cost"):
            typer.echo(
                f"cost:    none: {summary.skipped['bad-cost']:,} samples without a valid cost (below); "
                "fix their records, or compute costs with shardstream columns"
            )
    for problem in summary.problems:
        where = f" at byte {problem['offset']}" if problem["offset"] is not None else ""
        typer.echo(f"{problem['kind']}: {shown_path(problem['shard'])}{where}: {problem['reason']}")
    if summary.duplicate_keys:
        typer.echo(
            f"keys held by more than one sample: {summary.duplicate_keys} (lookup finds the first; "
            "in a GNU tar made without --sort=name, one sample's members can lie apart)"
        )
    if summary.unkeyed:
        typer.echo(f"keys with a NUL or newline, not in the key file: {summary.unkeyed}")


class _Bar:
    def __init__(self, quiet: bool) -> None:
        from tqdm import tqdm

        self.bar = tqdm(unit=" shards", disable=quiet, file=sys.stderr, dynamic_ncols=True, miniters=1)
        self.samples = 0

    def plan(self, shards: int) -> None:
        self.bar.reset(total=shards)

    def update(self, record: dict[str, Any]) -> None:
        self.samples += record["samples"]
        self.bar.update(1)
        self.bar.set_postfix_str(f"{self.samples:,} samples", refresh=False)

    def close(self) -> None:
        self.bar.close()
