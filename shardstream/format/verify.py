"""Check a dataset against its index: headers and sidecars cheaply; decoding every member at full cost.

The header walk (``scan.scan_file``) is the reference for sample boundaries: sample i spans
``[off[i], off[i+1])``, so packer shards and foreign tars (GNU tar's directory entries included) are held to
the same definition. Decoding every media member is optional: it reads every byte and costs CPU per member.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ShardstreamError, short_reason
from ..io.localfiles import open_regular
from ..io.urls import is_remote, local_path
from .index import DatasetIndex, ShardEntry
from .offsets import decode_offsets, offsets_name
from .scan import scan_file
from .sidecars import offsets_sidecar
from .tarread import iter_samples

DecoderFor = Callable[[str], Callable[[bytes], Any] | None]  # member name -> its decoder, None to skip it


@dataclass
class Verification:
    """What a check found: ``problems`` fail it, ``notes`` do not; ``shards`` are the local shards read."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    shards: list[Path] = field(default_factory=list)
    samples: int = 0  # in the local shards, as the index counts them
    decode_failures: list[dict[str, str]] = field(default_factory=list)
    decoded: dict[str, int] = field(default_factory=dict)


def shard_files(index_path: Path, index: DatasetIndex, entry: ShardEntry) -> tuple[Path, Path]:
    """A local shard's path and its offsets sidecar's: names may be relative to the index or absolute; the
    sidecar is beside the shard unless the index keeps sidecars in a folder of its own."""
    root, name = index_path.parent, local_path(entry.name)
    shard = root / name  # an absolute name (or a file:// URL's path) stays itself
    if index.sidecars is not None:
        return shard, root / index.sidecars / offsets_sidecar(entry.name)
    return shard, root / offsets_name(name)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open_regular(path) as handle:  # an index row naming /dev/zero would hash forever
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def check_dataset(index_path: Path) -> Verification:
    """Size, sha256 (when recorded), sample count and offsets of every local shard the index names."""
    index = DatasetIndex.load(index_path)
    found = Verification()
    remote = [entry.name for entry in index.shards if is_remote(entry.name)]
    if remote:
        found.problems.append(
            f"{len(remote)} shard(s) are URLs ({remote[0]}, ...): verify reads local shards only, so these "
            "were not checked"
        )
    if not index.checksums:
        found.notes.append("sha256 not recorded (an index made without --checksum): contents not hashed")
    for entry in index.shards:
        if not is_remote(entry.name):
            _check_shard(index_path, index, entry, found)
    return found


def _check_shard(index_path: Path, index: DatasetIndex, entry: ShardEntry, found: Verification) -> None:
    path, sidecar = shard_files(index_path, index, entry)
    problems = found.problems
    if not path.exists():
        problems.append(f"{path}: missing")
        return
    found.shards.append(path)
    found.samples += entry.samples
    size = path.stat().st_size
    if size != entry.size:
        problems.append(f"{path}: {size} bytes, index says {entry.size}")
    scan = scan_file(path, checksum=bool(entry.sha256))  # one read hashes and walks the headers
    if entry.sha256:
        try:
            digest = scan.sha256 or sha256_of(path)  # a damaged walk stops hashing early
        except OSError as exc:  # not a regular file (a FIFO, /dev/zero): the scan's damage says so below
            digest = f"not computed ({exc.strerror or exc})"
        if digest != entry.sha256:
            problems.append(f"{path}: sha256 {digest} does not match the index")
    if scan.damage is not None:
        problems.append(f"{path} at byte {scan.damage_offset}: {scan.damage}")
        return
    if scan.samples != entry.samples:
        problems.append(f"{path}: {scan.samples} samples, index says {entry.samples}")
    try:
        offsets = decode_offsets(sidecar.read_bytes(), source=str(sidecar), samples=entry.samples)
    except OSError as exc:
        problems.append(f"{sidecar}: {exc.strerror or exc}")
        return
    except ShardstreamError as exc:
        problems.append(str(exc))
        return
    if list(offsets) != list(scan.offsets):
        problems.append(f"{sidecar}: offsets do not point at each sample's first header")


def decode_check(
    found: Verification, decoder_for: DecoderFor, progress: Callable[[int], Any] | None = None
) -> None:
    """Decode every member ``decoder_for`` names a decoder for, in every local shard; one failure per member.

    A decoder raising ImportError (an optional dependency missing) is a problem once per extension, not a
    failure per member. Damage that stops the read was already reported by ``check_dataset``.
    """
    unavailable: dict[str, list[Any]] = {}  # extension -> [reason, members not decoded]
    for path in found.shards:
        try:
            with open_regular(path) as handle:
                for sample in iter_samples(handle, url=str(path)):
                    _decode_sample(sample, path, decoder_for, found, unavailable)
                    if progress is not None:
                        progress(1)
        except (OSError, ShardstreamError):
            continue
    for ext, (reason, count) in sorted(unavailable.items()):
        found.problems.append(f"{count} {ext} member(s) not decoded: {reason}")


def _decode_sample(
    sample: dict[str, Any],
    path: Path,
    decoder_for: DecoderFor,
    found: Verification,
    unavailable: dict[str, list[Any]],
) -> None:
    for name, data in sample.items():
        decode = None if name.startswith("__") else decoder_for(name)
        if decode is None:
            continue
        ext = name.lower().rsplit(".", 1)[-1]
        if ext in unavailable:
            unavailable[ext][1] += 1
            continue
        try:
            decode(data)
        except ImportError as exc:
            unavailable[ext] = [short_reason(exc), 1]
            continue
        except Exception as exc:  # any decoder error is this member's failure, reported
            found.decode_failures.append(
                {"shard": str(path), "key": sample["__key__"], "member": name, "reason": short_reason(exc)}
            )
            continue
        found.decoded[ext] = found.decoded.get(ext, 0) + 1


def verify_dataset(index_path: Path) -> list[str]:
    """Return one line per problem found; an empty list means the dataset matches its index."""
    return check_dataset(index_path).problems
