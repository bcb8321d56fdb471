"""Keys to sample masks by one merge walk of the sorted key file: only blocks that may hold a key are read."""

# The given keys are sorted and deduplicated (bytes, as the key file sorts them); the key file's block
# index (a few bytes a block) says which blocks can hold them, and runs of such blocks are read a few MiB
# at a time. Within a read, each wanted key is found by bisection over the read's lines (C speed: no Python
# work per line of the key file), and every line holding it is taken: a repeated key counts all its
# samples. Memory follows the wanted keys and their matches, never the dataset's sample count.

from __future__ import annotations

import bisect
import hashlib
import os
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import FormatError, redact_url
from ..format import INDEX_NAME, DatasetIndex, ShardColumns
from ..format.keyfile import IDX_SUFFIX, KeyFile
from ..format.samplecols import sample_columns_name
from ..format.sidecars import sample_columns_sidecar
from ..io.openers import OpenOptions, read_range, read_small
from ..io.urls import join_url, local_path, scheme_of

KeySource = str | os.PathLike[str] | Iterable[str]
Progress = Callable[[str, int, int], None]  # (stage, done, total): "keys" in bytes, "columns" in shards
READ_TARGET = 4 << 20  # bytes of adjacent key-file blocks read at once
SHOWN_MISSING = 5


@dataclass(frozen=True)
class SubsetSource:
    """A dataset opened for choosing samples: its index's URL and bytes, the index, per-shard counts."""

    url: str
    data: bytes
    index: DatasetIndex
    counts: np.ndarray
    names: Sequence[str]

    def columns_url(self, shard: int) -> str:
        """Where shard ``shard``'s per-sample columns (``.cols``) are: beside it or in the sidecars folder."""
        name = self.names[shard]
        if self.index.sidecars is not None:
            return join_url(self.url, f"{self.index.sidecars}/{sample_columns_sidecar(name)}")
        return sample_columns_name(join_url(self.url, name))


def open_dataset(dataset: str | os.PathLike[str], options: OpenOptions | None = None) -> SubsetSource:
    """A folder holding the index, or the index's path or URL; FormatError saying how to make one."""
    url = os.fspath(dataset)
    if scheme_of(url) == "file" and os.path.isdir(local_path(url)):
        url = os.path.join(url, INDEX_NAME)
    data = read_small(url, options)
    if data is None:
        raise FormatError(
            f"{redact_url(url)}: index not found; give a dataset folder holding {INDEX_NAME} or the "
            "index itself (make one with `shardstream pack` or `shardstream index`)"
        )
    version = hashlib.sha256(data).hexdigest()

    def beside(name: str) -> bytes | None:
        return read_small(join_url(url, name), options, version=version)

    index = DatasetIndex.from_json(data.decode("utf-8"), source=redact_url(url), read_columns=beside)
    shards = index.shards
    names = shards.names if isinstance(shards, ShardColumns) else [entry.name for entry in shards]
    counts = np.asarray(index.sample_counts(), dtype=np.int64)
    return SubsetSource(url=url, data=data, index=index, counts=counts, names=names)


def read_keys(source: KeySource, *, column: str | None = None) -> Iterator[str]:
    """The keys of ``source``: a text file (one a line; blank lines skipped, a trailing CR stripped), a
    ``.parquet`` file's string ``column`` (default: its only string column), or an iterable of str."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"{path}: no such keys file (give a text file, one key a line, or a .parquet)")
        if path.suffix.lower() == ".parquet":
            yield from _parquet_keys(path, column)
            return
        with path.open("rb") as handle:
            for line in handle:
                text = line.rstrip(b"\n").rstrip(b"\r")
                if text:
                    yield text.decode("utf-8", "surrogateescape")
        return
    if isinstance(source, (bytes, bytearray)) or not isinstance(source, Iterable):
        raise ValueError(f"keys must be a file path or an iterable of str, not {type(source).__name__}")
    for key in source:
        if not isinstance(key, str):
            raise ValueError(f"keys: {key!r} is a {type(key).__name__}, not a str")
        yield key


def _parquet_keys(path: Path, column: str | None) -> Iterator[str]:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as exc:
        raise ValueError(
            f"{path}: reading keys from Parquet needs pyarrow: pip install 'shardstream[parquet]'"
        ) from exc
    try:
        table = pyarrow.parquet.ParquetFile(path)
    except (OSError, pyarrow.ArrowException) as exc:
        raise ValueError(f"{path}: not a readable Parquet file ({exc})") from exc
    schema = table.schema_arrow
    strings = [
        f.name for f in schema if pyarrow.types.is_string(f.type) or pyarrow.types.is_large_string(f.type)
    ]
    if column is None:
        if len(strings) != 1:
            raise ValueError(
                f"{path}: {len(strings)} string columns ({', '.join(strings) or 'none'}) among "
                f"{', '.join(schema.names)}; name the one holding keys with column="
            )
        column = strings[0]
    elif column not in strings:
        raise ValueError(
            f"{path}: column={column!r} is not one of its string columns: {', '.join(strings) or 'none'}"
        )
    for batch in table.iter_batches(columns=[column], batch_size=65_536):
        yield from (key for key in batch.column(0).to_pylist() if key)


@dataclass(frozen=True, kw_only=True)
class KeyMatch:
    """The samples holding any of the given keys: ``shards`` and ``samples``, int64 arrays sorted by
    (shard, sample), one entry a matched sample. ``keys``: distinct keys given; ``found`` of them in the
    dataset, ``missing`` not (``missing_shown``: a few of those, for messages); ``matched``: samples."""

    keys: int
    found: int
    missing: int
    missing_shown: tuple[str, ...]
    shards: np.ndarray
    samples: np.ndarray

    @property
    def matched(self) -> int:
        return len(self.samples)

    def matched_shards(self) -> np.ndarray:
        """The shards holding a matched sample, ascending."""
        return np.unique(self.shards)

    def mask(self, shard: int, count: int) -> np.ndarray | None:
        """Shard ``shard``'s matched samples as a bool array of its ``count``; None when none matched."""
        lo, hi = np.searchsorted(self.shards, [shard, shard + 1])
        if lo == hi:
            return None
        mask = np.zeros(count, dtype=bool)
        mask[self.samples[lo:hi]] = True
        return mask


def key_masks(
    index_url: str | os.PathLike[str],
    keys: KeySource,
    *,
    options: OpenOptions | None = None,
    column: str | None = None,
    progress: Progress | None = None,
) -> KeyMatch:
    """The samples of the dataset at ``index_url`` (a folder or index) holding any of ``keys`` (see
    ``read_keys``), found through its sorted key file; FormatError when it has none."""
    return match_keys(open_dataset(index_url, options), read_keys(keys, column=column), options, progress)


def match_keys(
    source: SubsetSource,
    keys: Iterable[str],
    options: OpenOptions | None = None,
    progress: Progress | None = None,
) -> KeyMatch:
    """``key_masks`` over an opened dataset: one merge walk of the sorted ``keys`` and its key file."""
    keyfile = _open_key_file(source, options)
    wanted = sorted({key.encode("utf-8", "surrogateescape") for key in keys})
    given = len(wanted)
    unwritable = [k for k in wanted if b"\0" in k or b"\n" in k]  # no key file line can hold these
    if unwritable:
        wanted = [k for k in wanted if b"\0" not in k and b"\n" not in k]
    shards, samples = array("q"), array("q")
    missing: list[bytes] = list(unwritable)
    for start, end, block_keys in _reads(keyfile, wanted, missing):
        lines = _lines(keyfile, start, end)
        for key in block_keys:
            head = key + b"\0"
            at = bisect.bisect_left(lines, head)
            if at == len(lines) or not lines[at].startswith(head):
                missing.append(key)
                continue
            while at < len(lines) and lines[at].startswith(head):
                shard, sample = _place(lines[at], len(head), keyfile.source)
                shards.append(shard)
                samples.append(sample)
                at += 1
        if progress is not None:
            progress("keys", end, keyfile.length)
    if progress is not None:
        progress("keys", keyfile.length, keyfile.length)
    return _matched(source, keyfile.source, given, missing, shards, samples)


def _open_key_file(source: SubsetSource, options: OpenOptions | None) -> KeyFile:
    shown = redact_url(source.url)
    if source.index.keys is None:
        folder = os.path.dirname(local_path(shown)) or "."
        raise FormatError(
            f"{shown}: this dataset has no key file, so keys cannot be resolved; write one with "
            f"`shardstream index {folder}` (add --out DIR for remote or read-only shards)"
        )
    url = join_url(source.url, source.index.keys)
    idx = read_small(url + IDX_SUFFIX, options)
    if idx is None:
        raise FormatError(
            f"{redact_url(url)}{IDX_SUFFIX}: missing, though {shown} names the key file; "
            "run `shardstream index` on the dataset again"
        )
    return KeyFile(idx, lambda a, b: read_range(url, a, b, options), source=redact_url(url))


def _lines(keyfile: KeyFile, start: int, end: int) -> list[bytes]:
    """Bytes [start, end) of the key file as its lines, without their LF: a sorted list of bytes."""
    data = keyfile.read_range(start, end)
    if not data.endswith(b"\n"):
        raise FormatError(
            f"{keyfile.source}: a line cut short before byte {end}; run `shardstream index` again"
        )
    lines = data.split(b"\n")
    lines.pop()
    return lines


def _place(line: bytes, head: int, source: str) -> tuple[int, int]:
    """(shard, sample) from a key line's 16 hex digits after the key and its NUL."""
    place = line[head:]
    try:
        if len(place) != 16:
            raise ValueError(f"{len(place)} characters after the key, not 16")
        return int(place[:8], 16), int(place[8:], 16)
    except ValueError as exc:
        raise FormatError(
            f"{source}: a malformed line {line[:80]!r} ({exc}); run `shardstream index` again"
        ) from None


def _reads(
    keyfile: KeyFile, wanted: list[bytes], missing: list[bytes]
) -> Iterator[tuple[int, int, list[bytes]]]:
    """(start, end, keys): runs of adjacent blocks that may hold wanted keys, READ_TARGET bytes or so each,
    with the keys that fall in them; keys before the first block go to ``missing``."""
    firsts, starts = keyfile.first_keys, keyfile.starts
    block, run_start, run_end, run_keys = -1, -1, -1, []
    for key in wanted:  # the merge: keys and blocks both ascend, so the block pointer only moves on
        while block + 1 < len(firsts) and firsts[block + 1] <= key:
            block += 1
        if block < 0:
            missing.append(key)
            continue
        if run_keys and (starts[block] > run_end or starts[block + 1] - run_start > READ_TARGET):
            yield run_start, run_end, run_keys
            run_keys = []
        if not run_keys:
            run_start = starts[block]
        run_end = starts[block + 1]
        run_keys.append(key)
    if run_keys:
        yield run_start, run_end, run_keys


def _matched(
    source: SubsetSource, keyfile: str, given: int, missing: list[bytes], shards: array, samples: array
) -> KeyMatch:
    """The walk's matches checked against the index (a key file of another packing is refused)."""
    shard_array = np.frombuffer(shards, dtype=np.int64) if len(shards) else np.zeros(0, dtype=np.int64)
    sample_array = np.frombuffer(samples, dtype=np.int64) if len(samples) else np.zeros(0, dtype=np.int64)
    counts = np.append(source.counts, 0)  # a shard past the last one has room for no sample
    bad = sample_array >= counts[np.minimum(shard_array, len(counts) - 1)]
    if bad.any():
        at = int(np.flatnonzero(bad)[0])
        raise FormatError(
            f"{keyfile}: names shard {int(shard_array[at])} sample {int(sample_array[at])}, which the index "
            f"{redact_url(source.url)} does not have: a stale key file; run `shardstream index` again"
        )
    order = np.lexsort((sample_array, shard_array))
    missing.sort()
    shown = tuple(k.decode("utf-8", "surrogateescape") for k in missing[:SHOWN_MISSING])
    return KeyMatch(
        keys=given,
        found=given - len(missing),
        missing=len(missing),
        missing_shown=shown,
        shards=shard_array[order],
        samples=sample_array[order],
    )
