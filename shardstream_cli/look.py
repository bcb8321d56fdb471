"""``shardstream ls`` and ``cat``: look inside samples; ls streams every shard in order, cat seeks one sample.

ls reads every byte it lists and needs no index and no torch, but holds no member larger than the read
window: a large member's bytes are counted as they stream past and dropped (a 1 MiB ``.tar.gz`` may hold a
1 GiB member), through a ``ReadWindow`` whose large takes hand back the length alone; cat
finds a key through the index's sorted key file (one block read, then one sample read), and falls back to
reading the shards in order, much slower, when there is no key file (an index from ``shardstream pack``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import closing
from typing import TYPE_CHECKING, Annotated, Any

import typer

from shardstream.buffers import read_into
from shardstream.errors import ShardReadError, ShardstreamError, redact_url
from shardstream.format.constants import INDEX_NAME
from shardstream.format.window import ReadWindow
from shardstream.sizes import format_size

from .common import JsonFlag, echo_json, fail

if TYPE_CHECKING:
    from shardstream.io.openers import OpenOptions
    from streamer.placement.shards import ShardList

Source = Annotated[
    str,
    typer.Argument(
        help="An index (path, folder, URL, or folder URL ending in /), a brace pattern "
        "(data/train-{000..009}.tar) or one tar's path."
    ),
]
Limit = Annotated[int | None, typer.Option(min=1, help="Stop after this many samples (default: all).")]
Key = Annotated[str | None, typer.Argument(help="The sample's key (its __key__), e.g. sample000017.")]
Field = Annotated[
    str | None,
    typer.Argument(
        help="A member (jpg, json, 0.png, ...): its bytes, exactly, go to stdout. Without it: the "
        "sample's metadata as JSON."
    ),
]
Position = Annotated[
    int | None,
    typer.Option(
        min=0,
        help="The sample's position in the dataset (0 = first), instead of a KEY; the "
        "argument after SOURCE is then the FIELD.",
    ),
]

Found = tuple[dict[str, Any], int, int, int]  # sample, shard, sample within the shard, dataset position


def ls_command(source: Source, limit: Limit = None, as_json: JsonFlag = False) -> None:
    """List samples in order, one line each: the key, then every member with its size.

    Reads the shards from the first byte (no index needed, no torch imported); a closing line says how
    many samples were shown. --json prints JSON Lines instead: one {"key", "url", "members": {name: bytes}}
    object per sample and no closing line, so `| head` and `| jq` work as the listing streams.

    Example: shardstream ls shards/ --limit 20

    Example: shardstream ls 'data/train-{000000..000009}.tar' --json | jq -r .key
    """
    shards = shard_list(source)
    shown = 0
    try:
        for sample in sizes_in_order(shards, source_options(source)):
            members = member_sizes(sample)
            if as_json:
                url = redact_url(sample["__url__"])
                typer.echo(json.dumps({"key": sample["__key__"], "url": url, "members": members}))
            else:
                sizes = "  ".join(f"{name} {format_size(size)}" for name, size in members.items())
                typer.echo(f"{sample['__key__']}  {sizes}")
            shown += 1
            if shown == limit:
                break
        if not as_json:
            total = shards.total
            stopped = f" (stopped at --limit {limit})" if shown == limit and total is None else ""
            typer.echo(f"{shown}{'' if total is None else f' of {total}'} samples shown{stopped}")
    except BrokenPipeError:
        _quiet_stdout()
    except (ShardstreamError, OSError) as exc:
        raise fail(str(exc)) from exc


def cat_command(source: Source, key: Key = None, field: Field = None, position: Position = None) -> None:
    """Print one sample: a member's bytes exactly (FIELD given), else its metadata as JSON.

    A KEY is found through the index's key file (`shardstream index` writes one): one block read, then
    one sample read. An index without a key file (from `shardstream pack`) or a bare pattern is read in
    order until the key turns up, with a note on stderr. Exit 1 for an unknown key, a position past the
    end or a FIELD the sample lacks (the message names the members it has); exit 2 for usage errors.

    Example: shardstream cat shards/ sample000017 jpg > sample000017.jpg

    Example: shardstream cat shards/ --position 17 (the 18th sample's key, shard and member sizes)
    """
    if position is not None:
        if field is not None:
            raise fail("with --position, give at most one argument after SOURCE: the FIELD", code=2)
        key, field = None, key
    elif key is None:
        raise fail("give a KEY, or --position I (e.g. shardstream cat shards/ --position 0 jpg)", code=2)
    try:
        sample, shard, within, at = find_sample(source, key, position)
        if field is None:
            url = redact_url(sample["__url__"])
            echo_json(
                {
                    "key": sample["__key__"],
                    "url": url,
                    "shard": shard,
                    "sample_in_shard": within,
                    "position": at,
                    "members": member_sizes(sample),
                }
            )
            return
        if field not in sample or field.startswith("__"):
            names = ", ".join(member_sizes(sample)) or "none"
            raise fail(f"sample {sample['__key__']!r} has no member {field!r}; its members: {names}")
        out = typer.get_binary_stream("stdout")
        out.write(sample[field])
        out.flush()
    except BrokenPipeError:
        _quiet_stdout()
    except (ShardstreamError, OSError) as exc:
        raise fail(str(exc)) from exc


def resolve_source(source: str) -> str:
    """SOURCE with a folder, local or a URL ending in / (s3://bucket/data/), replaced by its index."""
    if os.path.isdir(source) or ("://" in source and source.endswith("/")):
        return os.path.join(source, INDEX_NAME)
    return source


def index_url(source: str) -> str | None:
    """The index a SOURCE names (a .json path or URL, or a folder holding one), else None (a pattern)."""
    text = resolve_source(source)
    return text if text.endswith(".json") else None


def source_options(source: str) -> OpenOptions:
    """How the CLI reaches SOURCE: headers ($SHARDSTREAM_HTTP_HEADERS) only to SOURCE's own origins, as a
    dataset sends them, never to another host a remote index names."""
    from shardstream.io.httpoptions import bind
    from shardstream.io.openers import OpenOptions

    return OpenOptions(http=bind(None, resolve_source(source)))


def shard_list(source: str) -> ShardList:
    """The streamer's ShardList for SOURCE (torch-free); an unusable source exits 1 with the reason."""
    from streamer.placement.shards import ShardList

    try:
        return ShardList.from_source(resolve_source(source), source_options(source))
    except (ShardstreamError, ValueError, OSError) as exc:
        raise fail(str(exc)) from exc


def read_in_order(shards: ShardList, options: OpenOptions) -> Iterator[Found]:
    """Every sample from the first shard's first byte on, with where it is."""
    from streamer.chain.opener import ShardOpener

    opener = ShardOpener(shards, options)
    position = 0
    for shard in range(len(shards)):
        samples, stream = opener.samples(shard, 0)
        with stream:
            for within, sample in enumerate(samples):
                yield sample, shard, within, position
                position += 1


def sizes_in_order(shards: ShardList, options: OpenOptions) -> Iterator[dict[str, Any]]:
    """Every sample in order, its members as bytes up to the read window's size and as ``Skipped``
    lengths beyond it: what ``ls`` prints, in memory bounded by the window whatever the members hold."""
    from shardstream.format import iter_samples
    from shardstream.io.openers import open_stream

    for shard, url in enumerate(shards.urls):
        with open_stream(url, options=options, sha256=shards.sha256(shard)) as stream:
            yield from iter_samples(stream, url=url, window=SizingWindow(stream, url))


class Skipped:
    """A member's length, its bytes dropped as they streamed past."""

    __slots__ = ("size", "url")

    def __init__(self, size: int, url: str) -> None:
        self.size, self.url = size, url

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:  # the reader parses only pax and long-name headers: never this large
        raise ShardReadError(f"an extended header of {self.size} bytes: too large to list", url=self.url)


class SizingWindow(ReadWindow):
    """A ReadWindow that reads a member larger than its buffer through the buffer, dropping the bytes,
    and hands back a ``Skipped`` of the length that came (short at the stream's end, so the reader still
    reports a cut member); smaller members are bytes as usual."""

    __slots__ = ("url",)

    def __init__(self, stream: Any, url: str) -> None:
        super().__init__(stream)
        self.url = url

    def take(self, size: int) -> Any:
        if size <= len(self.buf):
            return super().take(size)
        have = self.end - self.pos
        self.pos = self.end = 0
        while have < size:
            count = read_into(self.stream, self.view[: min(len(self.buf), size - have)])
            if not count:
                break
            have += count
        return Skipped(have, self.url)


def member_sizes(sample: dict[str, Any]) -> dict[str, int]:
    return {name: len(value) for name, value in sample.items() if not name.startswith("__")}


def find_sample(source: str, key: str | None, position: int | None) -> Found:
    """The sample with ``key`` (the first, if several) or at ``position``; exits 1 when there is none."""
    shards = shard_list(source)
    if shards.counts is not None and (position is not None or shards.keys_url is not None):
        from streamer.datasets.shardmap import ShardMap

        mapped = ShardMap(resolve_source(source), decode=False)
        if position is not None:
            try:
                shard, within = mapped.locate(position)
            except IndexError as exc:
                raise fail(f"position {position} is past the end: there are {len(mapped)} samples") from exc
            return mapped.read(shard, within), shard, within, position
        try:
            place = mapped.place(key)  # type: ignore[arg-type]
        except ShardstreamError as exc:
            _note(f"{exc}; reading the shards in order instead")
        else:
            if place is None:
                raise fail(f"no sample has key {key!r}")
            shard, within = place
            return mapped.read(shard, within), shard, within, mapped.position(shard, within)
    elif key is not None:
        reason = "the index has no key file" if shards.counts is not None else "no index"
        _note(
            f"{reason}: reading the shards in order to find {key!r} (shardstream index SOURCE makes a key "
            "file for one-read lookups)"
        )
    with closing(read_in_order(shards, source_options(source))) as samples:
        for found in samples:
            if found[0]["__key__"] == key or found[3] == position:
                return found
    raise fail(f"no sample has key {key!r}" if key is not None else f"position {position} is past the end")


def _note(message: str) -> None:
    typer.secho(f"note: {message}", fg=typer.colors.YELLOW, err=True)


def _quiet_stdout() -> None:
    """The reader went away (``| head``): stop quietly, and keep Python's exit flush from failing again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    finally:
        os.close(devnull)
