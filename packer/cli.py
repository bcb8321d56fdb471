"""The packer's commands (pack, info, verify) on one typer app; ``streamer.cli`` adds the rest."""

from __future__ import annotations

import json
import sys
import warnings
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from .errors import ShardstreamError
from .format import INDEX_NAME, DatasetIndex
from .options import PackOptions, parse_size
from .pack import PackSummary, ProgressHook, pack
from .sample import Reject
from .verify import verify_dataset

app = typer.Typer(
    name="shardstream",
    help="Pack multimodal data into WebDataset-style tar shards and stream them into PyTorch.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class ImageFormat(str, Enum):
    jpeg = "jpeg"
    png = "png"
    webp = "webp"


class AudioFormat(str, Enum):
    wav = "wav"
    flac = "flac"


class Naming(str, Enum):
    ext = "ext"
    field = "field"


class _Bar(ProgressHook):
    def __init__(self, quiet: bool) -> None:
        from tqdm import tqdm

        self.bar = tqdm(unit=" samples", disable=quiet, file=sys.stderr, dynamic_ncols=True, smoothing=0.1)
        self.bytes = 0
        self.samples = 0
        self.shards = 0
        self.rejects = 0
        self.quiet = quiet

    def sample(self, nbytes: int) -> None:
        self.bytes += nbytes
        self.samples += 1
        if self.quiet:
            return
        self.bar.update(1)
        if self.samples % 256 == 0:
            self._postfix()

    def shard(self, count: int) -> None:
        self.shards = count
        self._postfix()

    def reject(self, reject: Reject) -> None:
        self.rejects += 1

    def _postfix(self) -> None:
        if self.quiet:
            return
        elapsed = max(self.bar.format_dict.get("elapsed", 0) or 0, 1e-6)
        self.bar.set_postfix(
            MBps=f"{self.bytes / elapsed / 1e6:.1f}", shards=self.shards, rejects=self.rejects, refresh=False
        )

    def close(self) -> None:
        self._postfix()
        self.bar.close()


def _fail(message: str, code: int = 1) -> typer.Exit:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    return typer.Exit(code)


def _apply_config(ctx: typer.Context, config: Path | None, values: dict[str, Any]) -> dict[str, Any]:
    """Fill options the command line left at their defaults from a YAML file whose keys mirror them."""
    if config is None:
        return values
    import yaml

    try:
        loaded = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise _fail(f"--config {config}: {exc}") from exc
    if not isinstance(loaded, dict):
        raise _fail(f"--config {config}: expected a mapping of option names to values")
    loaded = loaded.get("pack", loaded)
    for raw_key, value in loaded.items():
        key = str(raw_key).replace("-", "_")
        if key not in values or key == "config":
            raise _fail(f"--config {config}: unknown option {raw_key!r}; known: {', '.join(sorted(values))}")
        # By name: typer may carry its own copy of click, whose enum is not click's.
        if getattr(ctx.get_parameter_source(key), "name", None) == "DEFAULT":
            values[key] = value
    return values


@app.command("pack")
def pack_command(
    ctx: typer.Context,
    source: Annotated[
        str, typer.Argument(help="A directory of raw files, or a manifest (.jsonl, .json, .csv, .parquet).")
    ],
    outdir: Annotated[Path, typer.Argument(help="Where shards, offsets sidecars and the index go.")],
    prefix: Annotated[str, typer.Option(help="Shard names: PREFIX-000000.tar, ...")] = "train",
    max_size: Annotated[
        str | None, typer.Option(help="Cap per shard on disk, tar padding included: 256MB, 1GiB, bytes.")
    ] = "256MB",
    max_count: Annotated[int | None, typer.Option(help="Cap on samples per shard.")] = None,
    workers: Annotated[
        int, typer.Option(help="Processes that read and transcode; output is identical for any N.")
    ] = 1,
    key_field: Annotated[
        str | None,
        typer.Option(help="Manifest field holding the sample key (default: id, key, or the record number)."),
    ] = None,
    media_root: Annotated[
        str | None,
        typer.Option(help="Folder manifest paths are relative to (default: the manifest's folder)."),
    ] = None,
    media_field: Annotated[
        list[str] | None,
        typer.Option(
            help="Manifest field holding media paths; repeat it. Default: any string with a media extension."
        ),
    ] = None,
    member_naming: Annotated[
        Naming, typer.Option(help="ext: key.jpg, key.0.jpg; field: key.image.jpg, key.images.0.jpg.")
    ] = Naming.ext,
    manifest_format: Annotated[
        str | None, typer.Option(help="jsonl, json, csv or parquet, when the name does not tell.")
    ] = None,
    image_max_side: Annotated[
        int | None, typer.Option(help="Downscale images so the longer side fits (EXIF orientation applied).")
    ] = None,
    image_format: Annotated[ImageFormat | None, typer.Option(help="Re-encode images to this format.")] = None,
    image_quality: Annotated[int, typer.Option(help="JPEG/WebP quality when re-encoding.")] = 90,
    audio_rate: Annotated[int | None, typer.Option(help="Resample audio to this rate (Hz).")] = None,
    audio_format: Annotated[AudioFormat | None, typer.Option(help="Re-encode audio to this format.")] = None,
    audio_mono: Annotated[bool, typer.Option(help="Downmix audio to one channel.")] = False,
    verify_media: Annotated[
        bool, typer.Option(help="Decode every media file; reject the corrupt ones.")
    ] = False,
    strict: Annotated[
        bool, typer.Option(help="Stop at the first rejected input instead of skipping it.")
    ] = False,
    resume: Annotated[
        bool, typer.Option(help="Continue an interrupted pack in OUTDIR; the result is identical.")
    ] = False,
    overwrite: Annotated[bool, typer.Option(help="Replace the shards and index already in OUTDIR.")] = False,
    config: Annotated[
        Path | None, typer.Option(help="YAML file whose keys mirror these options (see configs/).")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout.")] = False,
) -> None:
    """Pack raw files or a manifest into fixed-size tar shards plus an index.

    Files sharing a key (a/b/0001.jpg + a/b/0001.json -> key a/b/0001) form one sample. Inputs that cannot
    be packed are skipped, counted and listed in OUTDIR/shardstream-rejects.jsonl (or fatal with --strict).

    Example: shardstream pack data/ shards/ --max-size 1GB --workers 4
    """
    from .media import MediaOptions

    values = _apply_config(ctx, config, dict(ctx.params))
    try:
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
        options = PackOptions(
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
        )
        options.validate()
    except ValueError as exc:
        raise _fail(str(exc), 2) from exc
    bar = _Bar(bool(values["quiet"]) or (as_json and not sys.stderr.isatty()))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            summary = pack(values["source"], values["outdir"], options, hook=bar)
    except ShardstreamError as exc:
        raise _fail(str(exc)) from exc
    except KeyboardInterrupt:
        raise _fail("interrupted; run the same command with --resume to continue", 130) from None
    finally:
        bar.close()
    for warning in caught:
        typer.secho(f"warning: {warning.message}", fg=typer.colors.YELLOW, err=True)
    _print_summary(summary, as_json)


def _enum_value(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def _print_summary(summary: PackSummary, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(summary.to_json(), indent=2))
        return
    mb = summary.bytes / 1e6
    typer.echo(
        f"packed {summary.samples} samples into {summary.shards} shards ({mb:.1f} MB) in {summary.seconds}s"
    )
    typer.echo(f"pattern: {summary.pattern}")
    typer.echo(f"index:   {summary.index}")
    if summary.skipped or summary.duplicate_keys:
        detail = ", ".join(f"{k}: {n}" for k, n in sorted(summary.rejected.items()))
        typer.echo(f"skipped: {summary.skipped} ({detail}); see {summary.rejects}")
    if summary.duplicate_keys:
        typer.echo(f"duplicate keys across shards (kept): {summary.duplicate_keys}; see {summary.rejects}")
    if summary.oversized:
        typer.echo(f"oversized samples (alone in their shard): {summary.oversized}")


IndexArgument = Annotated[Path, typer.Argument(help=f"An index file or the folder holding {INDEX_NAME}.")]


def _index_path(index: Path) -> Path:
    return index / INDEX_NAME if index.is_dir() else index


@app.command("info")
def info_command(
    index: IndexArgument,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Show a packed dataset's index: pattern, shards, samples, bytes, fields."""
    path = _index_path(index)
    try:
        loaded = DatasetIndex.load(path)
    except (OSError, ShardstreamError) as exc:
        raise _fail(f"{path}: {exc}") from exc
    doc = {
        "pattern": loaded.pattern,
        "shards": len(loaded.shards),
        "samples": loaded.samples,
        "bytes": loaded.bytes,
        "fields": loaded.fields,
        "rejected": loaded.rejected,
    }
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    for name, value in doc.items():
        typer.echo(f"{name + ':':10}{value}")


@app.command("verify")
def verify_command(
    index: IndexArgument,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check every shard against the index: size, sha256, sample count, offsets. Exit 1 on a mismatch."""
    path = _index_path(index)
    try:
        problems = verify_dataset(path)
    except (OSError, ShardstreamError) as exc:
        raise _fail(f"{path}: {exc}") from exc
    if as_json:
        typer.echo(json.dumps({"index": str(path), "problems": problems, "ok": not problems}, indent=2))
    else:
        for problem in problems:
            typer.echo(problem)
        typer.echo("ok" if not problems else f"{len(problems)} problem(s)")
    if problems:
        raise typer.Exit(1)
