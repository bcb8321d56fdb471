"""Directory source: walk a tree lazily, one directory in memory at a time, grouping files by key."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

from shardstream.errors import KeyRuleError, PackError
from shardstream.format import check_key, normalize_extension

from ..sample import MemberPlan, Reject, SamplePlan
from .slices import Slice


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def walk_directory(root: str | os.PathLike[str], part: Slice | None = None) -> Iterator[SamplePlan | Reject]:
    """Yield a plan per key, in sorted order, and a reject for every file that cannot be a member.

    Memory is O(largest directory): entries are listed and sorted one directory at a time. ``part``
    walks one slice: from the key it starts at (skipping what sorts before it, unlisted) to the key the
    next slice starts at.
    """
    top = os.path.realpath(root)
    start = None if part is None or part.start is None else str(part.start)
    stop = part.stop if part is not None else None
    for item in _walk(top, "", top, frozenset({top}), start.split("/") if start else None):
        if start is not None and not (isinstance(item, SamplePlan) and item.key == start):
            raise PackError(
                f"{root}: this slice starts at key {start!r}, which is gone: the folder changed since the "
                "plan was made; plan again (pack --overwrite)"
            )
        start = None
        if stop is not None and isinstance(item, SamplePlan) and item.key == stop:
            return
        yield item


def _walk(
    directory: str, rel: str, top: str, ancestors: frozenset[str], cursor: list[str] | None = None
) -> Iterator[SamplePlan | Reject]:
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError as exc:
        yield Reject(os.path.join(directory), f"cannot list directory: {exc.strerror or exc}")
        return
    groups: dict[str, list[tuple[str, str, str, tuple[int, int]]]] = {}
    order: list[tuple[str, str, str]] = []  # (sort name, kind, payload)
    for entry in entries:
        found = _classify(entry, top, ancestors)
        if isinstance(found, Reject):
            if cursor is None:  # a slice entering mid-folder: the folder's rejects went to an earlier one
                yield found
            continue
        kind, real, identity = found
        if kind == "dir":
            order.append((entry.name, "dir", real))
            continue
        dot = entry.name.find(".")
        key_name = entry.name[:dot]
        if key_name not in groups:
            groups[key_name] = []
            order.append((key_name, "key", key_name))
        groups[key_name].append((normalize_extension(entry.name[dot + 1 :]), real, entry.path, identity))
    # Subdirectories and keys share one sorted order, so output order never depends on scandir order.
    order.sort(key=lambda item: (item[0], item[1]))
    for name, kind, payload in order:
        if cursor is not None:
            here = (cursor[0], "dir" if len(cursor) > 1 else "key")
            if (name, kind) < here:
                groups.pop(payload, None)
                continue
            inner, cursor = (cursor[1:] if (name, kind) == here and kind == "dir" else None), None
            if inner:
                yield from _walk(payload, f"{rel}{name}/", top, ancestors | {payload}, inner)
                continue
        if kind == "dir":
            yield from _walk(payload, f"{rel}{name}/", top, ancestors | {payload})
        else:
            yield _plan(f"{rel}{payload}", payload, groups.pop(payload))


def _classify(
    entry: os.DirEntry[str], top: str, ancestors: frozenset[str]
) -> Reject | tuple[str, str, tuple[int, int]]:
    """("dir" or "file", real path, (st_dev, st_ino)) for an entry to walk or pack, else the reject saying
    why. The identity is the file's as listed: the loader reads that file or none (a swap is refused)."""
    path = entry.path
    if entry.name.startswith("."):
        what = "hidden directory (skipped with its contents)" if entry.is_dir() else "hidden file"
        return Reject(path, what, "hidden")
    real = path
    if entry.is_symlink():
        real = os.path.realpath(path)
        if not os.path.exists(real):
            return Reject(path, "broken symlink", "unreadable")
        if not _inside(real, top):
            return Reject(path, f"symlink points outside SOURCE, to {real}", "outside")
    try:
        # scandir knows a plain folder by its type; a file needs its lstat (a link, its target's stat)
        # for the identity the loader checks, so a file swapped after this listing is never read.
        if real is path and entry.is_dir(follow_symlinks=False):
            mode, identity = stat.S_IFDIR, (0, 0)
        else:
            found = entry.stat(follow_symlinks=False) if real is path else os.stat(real)
            mode, identity = found.st_mode, (found.st_dev, found.st_ino)
    except OSError as exc:
        return Reject(path, f"cannot stat: {exc.strerror or exc}", "unreadable")
    if stat.S_ISDIR(mode):
        if real in ancestors:
            return Reject(path, "symlink loop: points at one of its own parent directories", "loop")
        return "dir", real, identity
    if not stat.S_ISREG(mode):
        return Reject(path, "not a regular file", "unreadable")
    dot = entry.name.find(".")
    if dot <= 0 or dot == len(entry.name) - 1:
        return Reject(path, "file has no extension, so it cannot be a sample member", "no-extension")
    return "file", real, identity


def _plan(key: str, key_name: str, files: list[tuple[str, str, str, tuple[int, int]]]) -> SamplePlan | Reject:
    """The sample of one key's files (extension, real path, path shown, identity), or why it cannot be one."""
    source = os.path.join(os.path.dirname(files[0][2]), key_name)
    seen: dict[str, str] = {}
    for ext, _real, shown, _ in files:
        if ext in seen:
            clash = f"two files map to member {key}.{ext}: {seen[ext]} and {shown}"
            return Reject(source, clash, "member-clash")
        seen[ext] = shown
    try:
        check_key(key)
    except KeyRuleError as exc:
        return Reject(source, str(exc), "bad-key")
    for ext, _real, shown, _ in files:
        if not _is_utf8(ext):  # the key is fine, but no tar name can hold this member's
            why = f"{shown!r}: its extension is not valid UTF-8, so no member name can hold it"
            return Reject(source, why, "bad-key")
    members = tuple(MemberPlan(ext=ext, path=real, listed=identity) for ext, real, _, identity in files)
    return SamplePlan(key=key, source=source, members=members)


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: os.listdir's spelling of bytes that are not UTF-8
        return False
    return True


def directory_slices(root: str, rows: int) -> list[Slice]:
    """Slices start at a sample's key, after ``rows`` or more items (samples and rejects) of the walk."""
    starts: list[tuple[int, str | None]] = [(0, None)]
    total = 0
    for number, item in enumerate(walk_directory(root)):
        total = number + 1
        if number - starts[-1][0] >= rows and isinstance(item, SamplePlan):
            starts.append((number, item.key))
    slices = [
        Slice(first, end - first, key, next_key)
        for (first, key), (end, next_key) in zip(starts, [*starts[1:], (total, None)], strict=True)
    ]
    return [s for s in slices if s.count or len(slices) == 1]
