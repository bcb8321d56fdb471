"""Raw samples batched for the trip out of a DataLoader worker: file references or one block, not pickles.

A member read zero-copy from a local shard crosses as (shard, start, end) and the main process maps the
same file (checked to be the same, unchanged; a mapping kept for later batches again, by one stat): nothing
is copied on either side. Any other member (bytes, an HTTP shard's) is copied once into one uint8 block per
batch, born in shared memory, so it crosses as one handle instead of one pickled object per member.
``pin_memory()`` gathers a batch into one pinned block for a GPU decoder. Trade-off: a member holds its
whole shard mapping (or batch block) alive.
"""

from __future__ import annotations

import itertools
import os
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from shardstream.errors import ShardReadError
from shardstream.format.window import ShardMapping
from shardstream.io.localfiles import open_regular_fd

__all__ = ["RawBatch", "raw_collate"]

_RAW = (bytes, bytearray, memoryview)
_BLOCK = -1  # a slot's source: the batch's block, else an index into ``files``
_OPEN_MAPPINGS = 32  # shard mappings the receiving process keeps open for the batches to come
_CHANGED = (
    "the shard changed on disk while its samples were in flight: a shard must not be rewritten while it is"
    " read; write a new file, or restart the epoch from a saved state"
)


class RawBatch:
    """A batch of raw samples: ``batch["jpg"]`` is every sample's member ``jpg`` (read-only memoryviews
    into the shard or the block), ``batch["__key__"]`` every sample's key; iterating gives sample dicts.

    Per member slot, in sample order: ``slots`` holds (source, start, end), the source being ``-1`` for
    ``block`` or an index into ``files`` ((path, identity) of a shard the member lies in); per sample,
    its member ``names`` and its other values (``meta``). ``here``: the mappings of ``files`` themselves,
    while the batch is still in the process that made it (None, as pickled: each file is mapped again,
    checked to be the same)."""

    __slots__ = ("_block", "_here", "files", "meta", "names", "slots")

    def __init__(
        self,
        block: torch.Tensor | None,
        slots: list[tuple[int, int, int]],
        files: list[tuple[str, tuple[int, int, int, int]]],
        names: list[tuple[str, ...]],
        meta: list[dict[str, Any]],
        here: list[ShardMapping] | None = None,
    ) -> None:
        self._here = here  # the mappings themselves, while the batch has not left the process that made it
        self._block = block  # None: no member is in a block (made empty when asked for)
        self.slots = slots
        self.files = files
        self.names = names
        self.meta = meta

    def __len__(self) -> int:
        return len(self.names)

    @property
    def block(self) -> torch.Tensor:
        """The uint8 block holding the members that are not references into a shard (maybe empty)."""
        if self._block is None:
            self._block = torch.empty(0, dtype=torch.uint8)
        return self._block

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Each sample as a dict, raw members as read-only memoryviews (into the shard or the block)."""
        views = self._views()
        slot = iter(self.slots)
        for names, meta in zip(self.names, self.meta, strict=True):
            sample = dict(meta)
            for name in names:
                source, start, end = next(slot)
                sample[name] = views[source][start:end]
            yield sample

    def __getitem__(self, index: int | str) -> Any:
        """``batch["jpg"]``: a column (every sample's raw member or other value of that name; KeyError
        naming how many samples lack it); ``batch[3]``: one sample as a dict."""
        if isinstance(index, str):
            return self.column(index)
        if not -len(self) <= index < len(self):
            raise IndexError(f"RawBatch index {index} out of range for {len(self)} samples")
        return next(itertools.islice(iter(self), index % len(self), None))

    def column(self, name: str) -> list[Any]:
        """Every sample's raw member ``name`` (memoryviews) or other value ``name``, in sample order;
        KeyError naming how many samples lack it."""
        first = self.names[0] if self.names else ()
        if name in first and all(names is first for names in self.names):  # alike samples: a stride
            views = self._views()
            at = first.index(name)
            return [views[source][start:end] for source, start, end in self.slots[at :: len(first)]]
        found: list[Any] = []
        views = None
        slot = 0  # where this sample's slots start
        for names, meta in zip(self.names, self.meta, strict=True):
            if name in names:
                views = views or self._views()
                source, start, end = self.slots[slot + names.index(name)]
                found.append(views[source][start:end])
            elif name in meta:
                found.append(meta[name])
            slot += len(names)
        if len(found) != len(self):
            raise KeyError(f"member {name!r} is in {len(found)} of the batch's {len(self)} samples")
        return found

    def member(self, name: str) -> list[memoryview]:
        """Every sample's raw member ``name``; KeyError naming how many samples lack it."""
        if not any(name in names for names in self.names):
            raise KeyError(f"member {name!r} is in 0 of the batch's {len(self)} samples")
        return self.column(name)

    def gathered(self, *, pin: bool = False) -> RawBatch:
        """The same batch with every member in one block (pinned with ``pin``): one host-to-device copy."""
        views = self._views()
        sizes = [end - start for _, start, end in self.slots]
        ends = [0, *itertools.accumulate(sizes)]
        block = torch.empty(ends[-1], dtype=torch.uint8, pin_memory=pin)
        target = memoryview(block.numpy())
        for (source, start, end), at in zip(self.slots, ends, strict=False):
            target[at : at + end - start] = views[source][start:end]
        slots = [(_BLOCK, at, end) for at, end in itertools.pairwise(ends)]
        return RawBatch(block, slots, [], self.names, self.meta)

    def pin_memory(self) -> RawBatch:
        """What ``DataLoader(pin_memory=True)`` calls."""
        return self.gathered(pin=True)

    def _views(self) -> dict[int, memoryview]:
        block = self._block
        views = {}
        if block is not None and block.numel():
            views[_BLOCK] = memoryview(block.numpy()).toreadonly()
        for number, (path, identity) in enumerate(self.files):
            views[number] = memoryview(self._here[number] if self._here else _mapping(path, identity))
        return views

    def __reduce__(self) -> tuple[Any, ...]:
        # An empty block (every member a reference) goes as None: an empty tensor costs ~50 us a batch
        # to pickle and unpickle (storage sharing), about half of what the rest of the batch costs.
        block = self._block if self._block is not None and self._block.numel() else None
        return (RawBatch, (block, self.slots, self.files, self.names, self.meta))


_mappings: OrderedDict[tuple[str, tuple[int, int, int, int]], ShardMapping] = OrderedDict()


def _mapping(path: str, identity: tuple[int, int, int, int]) -> ShardMapping:
    """The shard a worker read, mapped here too; ShardReadError if the file is not that one any more."""
    key = (path, tuple(identity))
    found = _mappings.get(key)  # type: ignore[call-overload]
    if found is not None:
        if _rewritten_in_place(path, identity):
            del _mappings[key]  # type: ignore[arg-type]
            raise ShardReadError(_CHANGED, url=path)
        _mappings.move_to_end(key)  # type: ignore[arg-type]
        return found
    try:
        fd = open_regular_fd(path)
        try:
            mapping = ShardMapping.of(fd, path)
        finally:
            os.close(fd)
    except OSError as exc:
        raise ShardReadError(f"cannot map the shard a worker read: {exc}", url=path) from exc
    if mapping.identity != tuple(identity):
        raise ShardReadError(_CHANGED, url=path)
    _mappings[key] = mapping  # type: ignore[index]
    while len(_mappings) > _OPEN_MAPPINGS:
        _mappings.popitem(last=False)  # members handed out keep their own mapping alive
    return mapping


def _rewritten_in_place(path: str, identity: tuple[int, int, int, int]) -> bool:
    """Whether the file kept mapped as ``identity`` was written since (one stat): the same inode at ``path``
    with another size or mtime, so the mapping now shows other bytes than the worker read. A file renamed
    over it or deleted is not: the kept mapping still holds the old inode, the bytes the worker read."""
    try:
        now = ShardMapping.identity_of(os.stat(path))
    except OSError:
        return False
    return now[:2] == tuple(identity[:2]) and now != tuple(identity)


def raw_collate(samples: Sequence[Mapping[str, Any]]) -> RawBatch:
    """``collate_fn`` for raw samples (``decode=False``; best with ``zero_copy=True``).

    Members read zero-copy from a local shard go as references, any other is copied once into the
    batch's block (in shared memory when this runs in a DataLoader worker); every other value
    (``__key__``, ``__url__``, decoded values) is kept per sample in ``meta``. In the main process,
    ``batch["jpg"]`` for a column of memoryviews, or iterate the batch for dicts; ``gathered()`` for one
    block."""
    names: list[tuple[str, ...]] = []
    meta: list[dict[str, Any]] = []
    slots: list[tuple[int, int, int]] = []
    files: dict[int, int] = {}  # id(mapping) -> its index in file_list
    file_list: list[tuple[str, tuple[int, int, int, int]]] = []
    here: list[ShardMapping] = []
    copies: list[tuple[int, Any]] = []  # (slot number, member) to copy into the block
    last: tuple[str, ...] = ()
    last_mapping, last_number = None, -1  # a batch's members mostly come from a few shards
    for sample in samples:  # one pass over each sample's items: this runs per sample in every worker
        own: list[str] = []
        kept: dict[str, Any] = {}
        for name, member in sample.items():
            if type(member) is memoryview:
                mapping = member.obj
                if mapping is last_mapping or type(mapping) is ShardMapping:
                    size = member.nbytes
                    if size:
                        own.append(name)
                        if mapping is not last_mapping:
                            last_number = files.get(id(mapping), -1)
                            if last_number < 0:
                                last_number = files[id(mapping)] = len(file_list)
                                file_list.append((mapping.path, mapping.identity))
                                here.append(mapping)
                            last_mapping = mapping
                        start = _offset_in(member, mapping)
                        slots.append((last_number, start, start + size))
                        continue
            elif not isinstance(member, _RAW):
                kept[name] = member
                continue
            own.append(name)
            copies.append((len(slots), member))
            slots.append((_BLOCK, 0, 0))
        if tuple(own) != last:
            last = tuple(own)  # one tuple object for a batch of alike samples: pickled once
        names.append(last)
        meta.append(kept)
    block = None
    if copies:
        sizes = [memoryview(member).nbytes for _, member in copies]
        block = _block(sum(sizes), shared=torch.utils.data.get_worker_info() is not None)
        target, at = memoryview(block.numpy()), 0
        for (slot, member), size in zip(copies, sizes, strict=True):
            target[at : at + size] = member
            slots[slot] = (_BLOCK, at, at + size)
            at += size
    return RawBatch(block, slots, file_list, names, meta, here)


def _numpy_offset_in(member: memoryview, mapping: ShardMapping) -> int:
    address = np.frombuffer(member, dtype=np.uint8).ctypes.data
    return int(address - np.frombuffer(mapping, dtype=np.uint8).ctypes.data)


try:  # the same in C (~0.1 us instead of ~6), built with the tar header fast path
    from shardstream.format._tarscan import offset_in as _offset_in
except ImportError:
    _offset_in = _numpy_offset_in


def _block(size: int, *, shared: bool) -> torch.Tensor:
    """An uninitialised uint8 tensor; in a DataLoader worker, born in shared memory as default_collate's
    outputs are (``share_memory_()`` after the fact costs a second allocation and copy: 7 ms vs 1 ms for
    2.3 MB here), so the queue sends a handle to it, not its bytes."""
    empty = torch.empty(0, dtype=torch.uint8)
    if not shared or size == 0:
        return empty.new_empty(size)
    storage = empty._typed_storage()._new_shared(size, device=empty.device)
    return empty.new(storage).resize_(size)
