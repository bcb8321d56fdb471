"""``shardstream stream``: read a dataset from the shell as training would; report samples/s and errors."""

from __future__ import annotations

import sys
import textwrap
import time
from collections import Counter
from typing import Annotated, Any

import typer

from shardstream.errors import ShardstreamError, redact_url

from .common import JsonFlag, QuietFlag, echo_json, fail, plain_warnings
from .profile import LiveLine, breakdown

Source = Annotated[
    str,
    typer.Argument(
        help="An index (path, folder or URL), a brace pattern, or a mixture's YAML file "
        "(configs/mixture-example.yaml)."
    ),
]
Workers = Annotated[int, typer.Option(help="DataLoader workers.")]
Decode = Annotated[bool, typer.Option(help="Decode members (images to tensors), or keep bytes.")]
Limit = Annotated[int | None, typer.Option(help="Stop after this many samples.")]
Rank = Annotated[int, typer.Option(help="Read as this rank...")]
WorldSize = Annotated[int, typer.Option(help="...of this many.")]
OnError = Annotated[str, typer.Option(help="raise, skip or warn.")]
ZeroCopy = Annotated[
    bool,
    typer.Option(
        help="Raw members as read-only views into mapped local shards (implies --no-decode); with "
        "--workers, batches of 64 cross by streamer.raw_collate."
    ),
]
DeferReads = Annotated[
    bool | None,
    typer.Option(
        "--defer-reads/--front-to-back",
        help="Shuffled local shards with sidecars: read each sample as it leaves the shuffle buffer (one "
        "pread; the buffer holds ids), or read every shard front to back. Neither: by sample size "
        "(shards whose samples average under 16 KiB are read front to back).",
        show_default=False,
    ),
]
Profile = Annotated[
    bool,
    typer.Option(
        "--profile",
        help="Say where the loader's time goes: a live line on stderr (samples/s, MB/s, time waiting "
        "for data, the verdict so far), then per process the seconds opening shards, waiting on bytes, "
        "decoding, in its own CPU and idle, the counts, the wait per batch and a verdict on what holds "
        "it back. With --json: streamer.watch(loader).stats() instead of the summary.",
    ),
]


def stream_command(
    source: Source,
    workers: Workers = 0,
    decode: Decode = True,
    limit: Limit = None,
    rank: Rank = 0,
    world_size: WorldSize = 1,
    on_error: OnError = "raise",
    zero_copy: ZeroCopy = False,
    defer_reads: DeferReads = None,
    profile: Profile = False,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Stream a dataset as training would and report samples/s, members seen and errors.

    Example: shardstream stream shards/ --workers 2 --limit 10000

    Example: shardstream stream https://host/data/shardstream-index.json

    Example: shardstream stream configs/mixture-example.yaml --json (a mixture: samples per source too)

    Example: shardstream stream shards/ --workers 4 --profile (is the loader the bottleneck?)
    """
    try:
        with plain_warnings():  # a weight-0 source's note, on_error="warn"'s skips
            if zero_copy and is_mixture(source):
                raise ValueError("--zero-copy reads one dataset, not a mixture")
            dataset = _dataset(
                source,
                decode=decode and not zero_copy,
                rank=rank,
                world_size=world_size,
                on_error=on_error,
                zero_copy=zero_copy,
                defer_reads=defer_reads,
            )
            shown = not (quiet or (as_json and not sys.stderr.isatty()))
            count, members, sources, seconds, watched = _read(
                dataset, workers, limit, zero_copy=zero_copy, shown=shown, profile=profile
            )
    except (ShardstreamError, ValueError) as exc:
        raise fail(str(exc)) from exc
    if watched is not None and as_json:
        echo_json(watched.stats())  # the breakdown instead of the summary: one JSON document on stdout
        return
    summary = {
        "source": redact_url(source),
        "samples": count,
        "seconds": round(seconds, 3),
        "samples_per_s": round(count / seconds, 1) if seconds else None,
        "members": dict(sorted(members.items())),
        "errors": dataset.errors,
    }
    if sources:
        summary["sources"] = dict(sorted(sources.items()))
    if as_json:
        echo_json(summary)
        return
    _print(summary, watched)


def _print(summary: dict[str, Any], watched: Any) -> None:
    """The summary for people, in 80 columns; with ``watched`` (--profile), the breakdown after it."""
    typer.echo(
        f"{summary['samples']} samples in {summary['seconds']:.2f}s ({summary['samples_per_s']} samples/s)"
    )
    for label in ("members", "sources", "errors"):
        if label in summary:  # name=count pairs, wrapped: a dict's repr ran past 80 columns
            pairs = ", ".join(f"{name}={value}" for name, value in summary[label].items())
            typer.echo(textwrap.fill(f"{label + ':':<8} {pairs}", 80, subsequent_indent=" " * 9))
    if watched is not None:
        typer.echo("")
        typer.echo("\n".join(breakdown(watched.stats())))


def is_mixture(source: str) -> bool:
    return source.endswith((".yaml", ".yml"))


def _dataset(
    source: str,
    *,
    decode: bool,
    rank: int,
    world_size: int,
    on_error: str,
    zero_copy: bool = False,
    defer_reads: bool | None = None,
) -> Any:
    """A ShardDataset, or a Mixture when ``source`` is a mixture's YAML file."""
    if not is_mixture(source):
        from streamer import ShardDataset

        return ShardDataset(
            source,
            decode=decode,
            image="torch",
            rank=rank,
            world_size=world_size,
            on_error=on_error,
            zero_copy=zero_copy,
            defer_reads=defer_reads,
        )
    from streamer.mixture.config import load_mixture
    from streamer.mixture.mixture import Mixture

    sources, options = load_mixture(source)
    if not decode:
        sources = [{**s, "decode": False} for s in sources]
    try:
        if defer_reads is not None:
            options = {**options, "defer_reads": defer_reads}
        return Mixture(sources, **{**options, "rank": rank, "world_size": world_size, "on_error": on_error})
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from exc


def _read(
    dataset: Any,
    workers: int,
    limit: int | None,
    *,
    zero_copy: bool = False,
    shown: bool = False,
    profile: bool = False,
) -> tuple[int, Counter[str], Counter[str], float, Any]:
    """Read up to ``limit`` samples through a DataLoader: (samples, members seen by name, samples by source
    for a mixture, seconds, the ``streamer.watch`` of the loader when ``profile``, else None).
    ``shown``: a progress bar on stderr, of this rank's samples per epoch where the index counts them;
    with ``profile``, the live line (``profile.py``) instead."""
    from tqdm import tqdm

    from streamer import watch

    batches, batched = _loader(dataset, workers, zero_copy)
    watched = watch(batches, dataset) if profile else None
    timed = watched if watched is not None else batches
    stream = (sample for batch in timed for sample in batch) if batched else timed
    total = _epoch_length(dataset)
    total = limit if total is None else total if limit is None else min(total, limit)
    live = LiveLine(watched, shown=shown) if watched is not None else None
    started = time.monotonic()
    count, members, sources = 0, Counter[str](), Counter[str]()
    # mininterval: a redraw costs about a microsecond per sample at most, against the reads it reports
    bar = tqdm(total=total, unit=" samples", disable=not shown or profile, file=sys.stderr, mininterval=0.2)
    try:
        for sample in stream:
            count += 1
            bar.update(1)
            if live is not None:
                live.tick(count)
            members.update(name for name in sample if not name.startswith("__"))
            if "__source__" in sample:
                sources[sample["__source__"]] += 1
            if limit is not None and count >= limit:
                break
    finally:
        bar.close()
        if live is not None:
            live.close(count)  # ended before an error's message or the report starts
    return count, members, sources, time.monotonic() - started, watched


def _loader(dataset: Any, workers: int, zero_copy: bool) -> tuple[Any, bool]:
    """What to iterate and whether it yields batches of samples. ``zero_copy`` samples are read here, or
    from workers in batches of 64 by ``raw_collate``: torch's default_convert would turn each memoryview
    into a list of its ints."""
    from torch.utils.data import DataLoader

    if zero_copy and not workers:
        return dataset, False
    if zero_copy:
        from streamer import raw_collate

        return DataLoader(dataset, batch_size=64, num_workers=workers, collate_fn=raw_collate), True
    return DataLoader(dataset, batch_size=None, num_workers=workers), False


def _epoch_length(dataset: Any) -> int | None:
    """This rank's samples per epoch, where the dataset knows them (an index's counts); else None."""
    try:
        return len(dataset)
    except TypeError:  # a bare pattern, or resampled: no counts, no end
        return None
