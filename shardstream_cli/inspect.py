"""``shardstream info``, ``stats`` and ``verify``: a dataset's figures from its index, else from tar headers.

The index answers at once; without one (or without per-field bytes) the shards' headers are walked, which
is cheap locally. ``verify --decode`` is the one that reads and decodes every media member: thorough, slow.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from shardstream.errors import ShardstreamError, redact_url
from shardstream.format.constants import INDEX_NAME
from shardstream.format.index import DatasetIndex
from shardstream.format.verify import Verification, check_dataset, decode_check
from shardstream.sizes import format_size

from .common import IndexArgument, JsonFlag, QuietFlag, echo_json, fail, index_path
from .look import Source, index_url, resolve_source, shard_list, source_options

if TYPE_CHECKING:
    from shardstream.io.openers import OpenOptions

IndexSource = Annotated[
    str,
    typer.Argument(
        help=f"An index file, the folder holding {INDEX_NAME}, or a URL of either (a folder URL "
        "ends in /: s3://bucket/shards/)."
    ),
]
VIDEO_FRAMES = 8  # frames decoded per clip by verify --decode, spread over it (all frames could fill memory)
Decode = Annotated[
    bool,
    typer.Option(
        "--decode",
        help="Also decode every image, audio and video member with the streamer's "
        f"decoders (reads every byte; slow). A video: its packets scanned, {VIDEO_FRAMES} frames "
        "decoded.",
    ),
]


def info_command(index: IndexSource, as_json: JsonFlag = False) -> None:
    """Show a packed dataset's index: pattern, shards, samples, bytes, fields.

    Example: shardstream info shards/

    Example: shardstream info s3://bucket/shards/ (any URL the streamer reads; a folder URL ends in /)
    """
    remote = "://" in index
    loaded = (
        _load_index(resolve_source(index), source_options(index))
        if remote
        else _load_local_index(Path(index))
    )
    doc = {
        "pattern": loaded.pattern,
        "shards": len(loaded.shards),
        "samples": loaded.samples,
        "bytes": loaded.bytes,
        "fields": loaded.fields,
        "rejected": loaded.rejected,
    }
    # Per-sample columns (pack --cost): name -> dtype and total, only when the index declares some.
    columns = {
        name: {"dtype": dtype, "total": sum(loaded.column_sums[name]) if name in loaded.column_sums else None}
        for name, dtype in loaded.sample_columns.items()
    }
    if columns:
        doc["sample_columns"] = columns
    if as_json:
        echo_json(doc)
        return
    # Sizes as pack and stats print them (104.0 MB), the exact count beside; --json keeps the integer.
    shown = {**doc, "bytes": f"{format_size(loaded.bytes)} ({loaded.bytes:,} bytes)"}
    if columns:
        del shown["sample_columns"]
        shown["columns"] = ", ".join(
            f"{name} ({c['dtype']}, total {c['total']:,})"
            if c["total"] is not None
            else f"{name} ({c['dtype']})"
            for name, c in columns.items()
        )
    for name, value in shown.items():
        typer.echo(f"{name + ':':10}{value}")


def stats_command(source: Source, as_json: JsonFlag = False) -> None:
    """Totals, per-field members and bytes, and how shard sizes and samples per shard are spread.

    From the index when it records per-field bytes (`shardstream index`); otherwise (an index from
    `shardstream pack`, a bare pattern) from a walk over the shards' tar headers, which skips member data.
    The output says which. Spreads are min, p50, p90 (nearest rank), max and mean. Exit 1 when a shard
    could not be read whole (the figures then count what was read).

    Example: shardstream stats shards/ --json

    Example: shardstream stats 'data/train-{000000..000099}.tar' (no index: headers walked)
    """
    url = index_url(source)
    shards = shard_list(source)
    options = source_options(source)
    index = _load_index(url, options) if url is not None else None
    damaged: list[str] = []
    if index is not None and index.field_bytes:
        origin = "index"
        fields = {ext: [index.fields.get(ext, 0), size] for ext, size in index.field_bytes.items()}
        sizes, counts = index.shard_sizes().tolist(), index.sample_counts().tolist()
    else:
        origin = "scan of the shards' tar headers" + (" (the index has no field_bytes)" if index else "")
        fields, sizes, counts = _scan_all(shards.urls, damaged, options)
    doc = {
        "source": redact_url(source),
        "from": origin,
        "shards": len(sizes),
        "samples": sum(counts),
        "bytes": sum(sizes),
        "fields": {ext: {"members": n, "bytes": size} for ext, (n, size) in sorted(fields.items())},
        "shard_bytes": spread(sizes),
        "samples_per_shard": spread(counts),
        "damaged": damaged,
    }
    if as_json:
        echo_json(doc)
    else:
        _print_stats(doc)
    if damaged:
        raise typer.Exit(1)


def verify_command(
    index: IndexArgument, decode: Decode = False, quiet: QuietFlag = False, as_json: JsonFlag = False
) -> None:
    """Check every shard against the index: size, sha256, sample count, offsets. Exit 1 on a mismatch.

    Indexes from `shardstream pack` and `shardstream index` both work: a sha256 the index did not record
    is not checked (said once), sidecars are found where the index keeps them. Offsets must match a walk
    over the tar headers. --decode also decodes every image, audio and video member (extensions as the
    streamer's decoders registry maps them) and names each one that fails, with a progress bar on stderr.
    --json: {"index", "problems", "notes", "ok"}, plus "decode_failures" [{"shard", "key", "member",
    "reason"}] and "decoded" {extension: members} with --decode.

    Example: shardstream verify shards/ --json

    Example: shardstream verify shards/ --decode
    """
    path = index_path(index)
    try:
        found = check_dataset(path)
        if decode:
            _decode(found, quiet=quiet or as_json)
    except (OSError, ShardstreamError) as exc:
        raise _index_failure(path, exc) from exc
    ok = not found.problems and not found.decode_failures
    if as_json:
        doc: dict[str, Any] = {"index": str(path), "problems": found.problems, "notes": found.notes}
        if decode:
            doc.update(decode_failures=found.decode_failures, decoded=dict(sorted(found.decoded.items())))
        echo_json({**doc, "ok": ok})
    else:
        for note in found.notes:
            typer.echo(f"note: {note}")
        for problem in found.problems:
            typer.echo(problem)
        for failure in found.decode_failures:
            typer.echo(
                f"{failure['shard']}: sample {failure['key']!r} member {failure['member']!r} does not "
                f"decode: {failure['reason']}"
            )
        decoded = ", ".join(f"{n} {ext}" for ext, n in sorted(found.decoded.items())) or "no media members"
        failures = len(found.decode_failures)
        summary = "ok" if ok else f"{len(found.problems)} problem(s), {failures} decode failure(s)"
        typer.echo(summary + (f"; decoded {decoded}" if decode else ""))
    if not ok:
        raise typer.Exit(1)


def spread(values: list[int]) -> dict[str, float]:
    """min, p50, p90 (nearest rank: always one of the values), max and mean; empty -> {}."""
    if not values:
        return {}
    ordered = sorted(values)
    rank = lambda p: ordered[max(0, math.ceil(p * len(ordered)) - 1)]  # noqa: E731
    mean = round(sum(ordered) / len(ordered), 1)
    return {"min": ordered[0], "p50": rank(0.5), "p90": rank(0.9), "max": ordered[-1], "mean": mean}


def _scan_all(
    urls: Any, damaged: list[str], options: OpenOptions
) -> tuple[dict[str, list[int]], list[int], list[int]]:
    """Per-field [members, bytes], shard sizes and samples per shard from the headers of every shard."""
    from shardstream.format.scan import scan_file, scan_shard

    fields: dict[str, list[int]] = {}
    sizes, counts = [], []
    for url in urls:
        if "://" not in url and not url.endswith((".gz", ".tgz")):
            scan = scan_file(url)
        else:  # remote or compressed: streamed, read and dropped
            from shardstream.io.openers import open_stream

            with open_stream(url, options=options) as stream:
                scan = scan_shard(stream, url=url)
        if scan.damage is not None:
            damaged.append(f"{redact_url(url)} at byte {scan.damage_offset}: {scan.damage}")
        for ext, (n, size) in scan.fields.items():
            total = fields.setdefault(ext, [0, 0])
            total[0] += n
            total[1] += size
        sizes.append(scan.size)
        counts.append(scan.samples)
    return fields, sizes, counts


def _print_stats(doc: dict[str, Any]) -> None:
    typer.echo(f"source:   {doc['source']}")
    typer.echo(f"figures:  from the {doc['from']}")
    typer.echo(f"shards:   {doc['shards']}   samples: {doc['samples']}   bytes: {format_size(doc['bytes'])}")
    typer.echo("fields:   members, bytes")
    for ext, figures in doc["fields"].items():
        typer.echo(f"  {ext:12} {figures['members']:>10}  {format_size(figures['bytes']):>9}")
    rows: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
        ("shard size:", "shard_bytes", lambda value: format_size(round(value))),
        ("samples/shard:", "samples_per_shard", str),
    )
    for title, name, show in rows:
        typer.echo(f"{title:15}" + "  ".join(f"{key} {show(value)}" for key, value in doc[name].items()))
    for line in doc["damaged"]:
        typer.echo(f"damaged: {line}")


def _load_local_index(index: Path) -> DatasetIndex:
    path = index_path(index)
    try:
        return DatasetIndex.load(path)
    except (OSError, ShardstreamError) as exc:
        raise _index_failure(path, exc) from exc


def _load_index(url: str, options: OpenOptions) -> DatasetIndex:
    from shardstream.io.openers import read_small
    from shardstream.io.urls import join_url

    try:
        data = read_small(url, options)
    except (OSError, ShardstreamError) as exc:
        raise fail(str(exc)) from exc
    if data is None:
        raise fail(f"{redact_url(url)}: index not found")
    try:
        beside = lambda name: read_small(join_url(url, name), options)  # noqa: E731  (a version-2 index's columns)
        return DatasetIndex.from_json(data.decode("utf-8"), source=redact_url(url), read_columns=beside)
    except (OSError, ShardstreamError) as exc:
        raise fail(str(exc)) from exc


def _decode(found: Verification, *, quiet: bool) -> None:
    """Decode the media members of every local shard, with a progress bar unless ``quiet``."""
    from tqdm import tqdm

    bar = tqdm(total=found.samples, unit=" samples", disable=quiet, file=sys.stderr, dynamic_ncols=True)
    with bar:
        decode_check(found, _media_decoders(), progress=bar.update)


def _media_decoders() -> Callable[[str], Callable[[bytes], Any] | None]:
    """Member name -> decoder, for the extensions the streamer's registry maps to its media decoders."""
    from shardstream.mediatypes import IMAGE_FORMATS
    from streamer.decode.registry import DECODERS, decode_audio, decode_image, decode_video

    media = (
        (decode_image, partial(decode_image, mode="pil")),
        (decode_audio, decode_audio),
        (decode_video, partial(decode_video, frames=VIDEO_FRAMES)),
    )
    table = {ext: bound for ext, fn in DECODERS.items() for base, bound in media if fn is base}
    for ext, formats in IMAGE_FORMATS.items():  # an image opens only as its extension's format, as streamed
        if DECODERS.get(ext) is decode_image:
            table[ext] = partial(decode_image, mode="pil", formats=formats)
    return lambda name: table.get(name.lower().rsplit(".", 1)[-1])


def _index_failure(path: Path, exc: OSError | ShardstreamError) -> typer.Exit:
    """The error for an index that cannot be read, naming it once: a ShardstreamError names it itself."""
    if isinstance(exc, ShardstreamError):
        return fail(str(exc))
    return fail(f"{path}: {exc.strerror or exc}")
