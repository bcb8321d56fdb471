"""``shardstream pack``: raw files or a manifest into shards, with a progress bar, --config and --json."""

from __future__ import annotations

import sys
import warnings
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from shardstream.errors import ShardstreamError
from shardstream.sizes import format_size, parse_size

from .common import JsonFlag, QuietFlag, echo_json, fail, shown_path, shown_paths


class ImageFormat(str, Enum):
    jpeg = "jpeg"
    jpg = "jpg"  # the extension users type; the packer records it as jpeg
    png = "png"
    webp = "webp"


class AudioFormat(str, Enum):
    wav = "wav"
    flac = "flac"


class Naming(str, Enum):
    ext = "ext"
    field = "field"


Source = Annotated[
    str,
    typer.Argument(
        help="A directory of raw files; a manifest (.jsonl, .json, .csv, .parquet) whose records name "
        "files or embed their bytes (HF datasets' Image/Audio columns); a folder of Parquet files (one "
        "split); or a datasets save_to_disk folder (Arrow)."
    ),
]
Outdir = Annotated[
    str,
    typer.Argument(
        help="Where shards, offsets sidecars and the index go: a folder, or a URL (s3://bucket/shards) "
        "packed in parts through local scratch ($SHARDSTREAM_SCRATCH)."
    ),
]
Prefix = Annotated[str, typer.Option(help="Shard names: PREFIX-000000.tar, ...")]
MaxSize = Annotated[
    str | None, typer.Option(help="Cap per shard on disk, tar padding included: 256MB, 1GiB, bytes.")
]
MaxCount = Annotated[int | None, typer.Option(help="Cap on samples per shard.")]
Workers = Annotated[
    int, typer.Option(help="Processes that read and transcode; output is identical for any N.")
]
KeyField = Annotated[
    str | None,
    typer.Option(help="Manifest field holding the sample key (default: id, key, or the record number)."),
]
MediaRoot = Annotated[
    str | None,
    typer.Option(help="Folder relative media paths start from (default: the manifest's folder)."),
]
MediaField = Annotated[
    list[str] | None,
    typer.Option(
        help="Manifest field holding media paths; repeat it. Default: any string with a media extension."
    ),
]
MemberNaming = Annotated[
    Naming, typer.Option(help="ext: key.jpg, key.0.jpg; field: key.image.jpg, key.images.0.jpg.")
]
ManifestFormat = Annotated[
    str | None,
    typer.Option(help="jsonl, json, csv, parquet or arrow, when the name (or folder) does not tell."),
]
CostField = Annotated[
    str | None,
    typer.Option(
        "--cost",
        metavar="FIELD",
        help="Record field (manifest row, KEY.json) with each sample's cost, a non-negative integer "
        "such as num_tokens: written per shard to a .cols file, summed in the index; other values "
        "are rejects of kind bad-cost. @estimate: text characters / 4 + 576 per image instead "
        "(@estimate:chars_per_token=N,image_tokens=N).",
    ),
]
ImageMaxSide = Annotated[
    int | None, typer.Option(help="Downscale images so the longer side fits (EXIF orientation applied).")
]
ImageFormatOption = Annotated[
    ImageFormat | None, typer.Option(help="Re-encode images to this format.", case_sensitive=False)
]
ImageQuality = Annotated[int, typer.Option(help="JPEG/WebP quality when re-encoding.")]
AudioRate = Annotated[int | None, typer.Option(help="Resample audio to this rate (Hz).")]
AudioFormatOption = Annotated[AudioFormat | None, typer.Option(help="Re-encode audio to this format.")]
AudioMono = Annotated[bool, typer.Option(help="Downmix audio to one channel.")]
VerifyMedia = Annotated[bool, typer.Option(help="Decode every media file; reject the corrupt ones.")]
Strict = Annotated[bool, typer.Option(help="Stop at the first rejected input instead of skipping it.")]
Resume = Annotated[
    bool, typer.Option(help="Continue an interrupted pack in OUTDIR; the result is identical.")
]
Overwrite = Annotated[bool, typer.Option(help="Replace the shards and index already in OUTDIR.")]
Config = Annotated[
    Path | None, typer.Option(help="YAML file whose keys mirror these options (see configs/).")
]


class Engine(str, Enum):
    local = "local"
    ray = "ray"


PartitionRows = Annotated[
    int | None,
    typer.Option(
        help="Pack in parts of about this many records (whole Parquet row groups; a folder's files): "
        "plan -> parts -> commit. The same value gives the same bytes on any engine. Default with "
        "--engine ray: 100000."
    ),
]
EngineOption = Annotated[
    Engine, typer.Option(help="Where the parts run: local (this process) or ray (Ray core tasks).")
]
RayAddress = Annotated[
    str | None,
    typer.Option(help="A running Ray cluster (host:port or 'auto'); default: a Ray head just for this pack."),
]


def pack_command(
    ctx: typer.Context,
    source: Source,
    outdir: Outdir,
    prefix: Prefix = "train",
    max_size: MaxSize = "256MB",
    max_count: MaxCount = None,
    workers: Workers = 1,
    key_field: KeyField = None,
    media_root: MediaRoot = None,
    media_field: MediaField = None,
    member_naming: MemberNaming = Naming.ext,
    manifest_format: ManifestFormat = None,
    cost: CostField = None,
    image_max_side: ImageMaxSide = None,
    image_format: ImageFormatOption = None,
    image_quality: ImageQuality = 90,
    audio_rate: AudioRate = None,
    audio_format: AudioFormatOption = None,
    audio_mono: AudioMono = False,
    verify_media: VerifyMedia = False,
    strict: Strict = False,
    resume: Resume = False,
    overwrite: Overwrite = False,
    partition_rows: PartitionRows = None,
    engine: EngineOption = Engine.local,
    ray_address: RayAddress = None,
    config: Config = None,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Pack raw files or a manifest into fixed-size tar shards plus an index.

    Files sharing a key (a/b/0001.jpg + a/b/0001.json -> key a/b/0001) form one sample. Inputs that cannot
    be packed are skipped, counted and listed in OUTDIR/shardstream-rejects.jsonl (or fatal with --strict).

    Example: shardstream pack data/ shards/ --max-size 1GB --workers 4

    On a cluster: --engine ray [--ray-address HOST:PORT] runs parts as Ray tasks (--workers parts at once);
    any other scheduler (a SLURM array, Spark) runs `shardstream pack plan|part|commit` (see their --help).
    A source folder named plan, part or commit is given as ./plan.
    """
    values = apply_config(ctx, config, dict(ctx.params))
    try:
        options = pack_options(values)
    except ValueError as exc:
        raise fail(str(exc), 2) from exc
    from packer.progress import PackBar

    bar = PackBar(bool(values["quiet"]) or (as_json and not sys.stderr.isatty()))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            summary = _run_pack(values, options, bar)
    except ShardstreamError as exc:
        raise fail(str(exc)) from exc
    except KeyboardInterrupt:
        raise fail("interrupted; run the same command with --resume to continue", 130) from None
    finally:
        bar.close()
    for warning in caught:
        typer.secho(f"warning: {warning.message}", fg=typer.colors.YELLOW, err=True)
    print_summary(summary, as_json)


def _run_pack(values: dict[str, Any], options: Any, bar: Any) -> Any:
    from shardstream.io.urls import is_remote

    engine = _enum_value(values.get("engine")) or "local"
    rows = values.get("partition_rows")
    if engine == "local" and rows is None and not is_remote(str(values["outdir"])):
        from packer import pack

        return pack(values["source"], values["outdir"], options, hook=bar)
    from packer.cluster import pack_in_parts
    from packer.cluster.plan import DEFAULT_PARTITION_ROWS

    return pack_in_parts(
        values["source"],
        values["outdir"],
        options,
        partition_rows=rows or DEFAULT_PARTITION_ROWS,
        engine=engine,
        ray_address=values.get("ray_address"),
        hook=bar,
    )


def pack_options(values: dict[str, Any]) -> Any:
    """PackOptions from the command line's (and config file's) values; ValueError names a bad one."""
    from packer import MediaOptions, PackOptions

    media = MediaOptions(
        image_max_side=values["image_max_side"],
        image_format=_enum_value(values["image_format"]),
        image_quality=values["image_quality"],
        audio_rate=values["audio_rate"],
        audio_format=_enum_value(values["audio_format"]),
        audio_mono=bool(values["audio_mono"]),
        verify=bool(values["verify_media"]),
    )
    fields = values["media_field"]
    return PackOptions(
        prefix=values["prefix"],
        max_size=parse_size(values["max_size"]) if values["max_size"] not in (None, "", 0, "0") else None,
        max_count=values["max_count"],
        workers=values["workers"],
        key_field=values["key_field"],
        media_root=values["media_root"],
        media_fields=tuple([fields] if isinstance(fields, str) else fields) if fields else None,
        member_naming=_enum_value(values["member_naming"]),
        manifest_format=values["manifest_format"],
        media=media,
        strict=bool(values["strict"]),
        resume=bool(values["resume"]),
        overwrite=bool(values["overwrite"]),
        cost=values.get("cost") or None,
    )


def apply_config(ctx: typer.Context, config: Path | None, values: dict[str, Any]) -> dict[str, Any]:
    """Fill options the command line left at their defaults from a YAML file whose keys mirror them."""
    if config is None:
        return values
    import yaml

    try:
        loaded = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise fail(f"--config {config}: {exc}") from exc
    if not isinstance(loaded, dict):
        raise fail(f"--config {config}: expected a mapping of option names to values")
    loaded = loaded.get("pack", loaded)
    for raw_key, value in loaded.items():
        key = str(raw_key).replace("-", "_")
        if key not in values or key == "config":
            raise fail(f"--config {config}: unknown option {raw_key!r}; known: {', '.join(sorted(values))}")
        # By name: typer may carry its own copy of click, whose enum is not click's.
        if getattr(ctx.get_parameter_source(key), "name", None) == "DEFAULT":
            values[key] = value
    return values


def _enum_value(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def print_summary(summary: Any, as_json: bool) -> None:
    if as_json:
        echo_json(shown_paths(summary.to_json(), "index", "rejects"))
        return
    index, rejects = shown_path(summary.index), shown_path(summary.rejects)
    typer.echo(
        f"packed {summary.samples} samples into {summary.shards} shards ({format_size(summary.bytes)}) "
        f"in {summary.seconds}s"
    )
    typer.echo(f"pattern: {summary.pattern}")
    typer.echo(f"index:   {index}")
    if summary.skipped or summary.duplicate_keys:
        detail = ", ".join(f"{k}: {n}" for k, n in sorted(summary.rejected.items()))
        typer.echo(f"skipped: {summary.skipped} ({detail}); see {rejects}")
    if summary.duplicate_keys:
        typer.echo(f"duplicate keys across shards (kept): {summary.duplicate_keys}; see {rejects}")
    if summary.oversized:
        typer.echo(f"oversized samples (alone in their shard): {summary.oversized}")
